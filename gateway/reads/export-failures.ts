import { Counter, type Registry } from 'prom-client'
import type { CutReason } from './chunked-body-writer.js'

/**
 * Why an export ended after its status was sent without its last byte: `idle`, its reader
 * took nothing for EXPORT_IDLE_TIMEOUT_MS; `store`, the receipt store failed midway. Either
 * way the connection was closed before the final chunk.
 */
export type ExportFailureReason = CutReason | 'store'

const REASONS: readonly ExportFailureReason[] = ['idle', 'store']

/** Exports cut short, by reason, as `sgw_export_failures_total`; counted here, read by the scrape. */
export class ExportFailures {
  readonly #counts = new Map<ExportFailureReason, number>(REASONS.map((r) => [r, 0]))

  add(reason: ExportFailureReason): void {
    this.#counts.set(reason, (this.#counts.get(reason) ?? 0) + 1)
  }

  register(registry: Registry): void {
    const counts = this.#counts
    new Counter({
      name: 'sgw_export_failures_total',
      help: 'Receipt exports cut short after their status was sent, by reason: idle (the reader took nothing for EXPORT_IDLE_TIMEOUT_MS) or store (the receipt store failed midway).',
      labelNames: ['reason'],
      registers: [registry],
      collect(this: Counter<'reason'>) {
        this.reset()
        for (const [reason, n] of counts) this.inc({ reason }, n)
      },
    })
  }
}
