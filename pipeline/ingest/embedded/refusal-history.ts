import type { IngestErrorPage, IngestErrorRecord, RefusalHistory } from '../ports.js'
import { IngestErrorLog, type IngestErrorLogOptions } from './ingest-error-log.js'

/** A nonce a refused request claimed before a restart, which must stay spent after it. */
export interface RefusedNonce {
  readonly sourceId: string
  readonly keyId: string
  readonly nonce: string
  readonly time: number
}

/**
 * The refusal history of a single gateway process: IngestErrorLog, in memory and in its
 * own file. Since the signal log never holds a refused request, this history is also
 * where a restart finds the nonces such requests claimed (`refusedNonces`).
 */
export class EmbeddedRefusalHistory implements RefusalHistory {
  readonly #log: IngestErrorLog
  #refusedNonces: readonly RefusedNonce[]

  private constructor(log: IngestErrorLog, refusedNonces: readonly RefusedNonce[]) {
    this.#log = log
    this.#refusedNonces = refusedNonces
  }

  /** Opens and reads the history kept in `dir`, keeping the nonces refused requests claimed since `nonceSinceMs`. */
  static async open(dir: string, options: IngestErrorLogOptions & { readonly nonceSinceMs: number }): Promise<EmbeddedRefusalHistory> {
    const log = await IngestErrorLog.open(dir, options)
    return new EmbeddedRefusalHistory(log, await log.load(options.nonceSinceMs))
  }

  record(sourceId: string, record: IngestErrorRecord, claimedNonce?: string): void {
    this.#log.record(sourceId, record, claimedNonce)
  }

  page(sourceId: string, limit: number, cursor: string | undefined): Promise<IngestErrorPage | undefined> {
    return Promise.resolve(this.#log.page(sourceId, limit, cursor))
  }

  /** The nonces refused requests claimed within the nonce window before the start; handed over once. */
  takeRefusedNonces(): readonly RefusedNonce[] {
    const nonces = this.#refusedNonces
    this.#refusedNonces = []
    return nonces
  }

  /** Writes back what was appended: the next start reads it. */
  close(): Promise<void> {
    return this.#log.close()
  }
}
