import type { DisputeRecord } from '../registry/index.js'
import { receiptIdOf, type DisputeStatusInput, type ReceiptStore } from '../receipts/index.js'

/** What the dispute sync reads of the registry, the source of truth for disputes. */
export interface DisputeSource {
  allDisputes(): readonly DisputeRecord[]
}

/** Dispute status rows written per store call. */
const ROWS_PER_WRITE = 1000

const STATUS = { open: 'open', accepted: 'disputed', rejected: 'rejected' } as const

/**
 * Puts each dispute's state on the receipts it names: `open` when opened, `disputed`
 * (accepted) or `rejected` when resolved. The registry is the truth; this only brings
 * the store to it, so nothing is lost when ClickHouse is down at the moment a dispute
 * changes: a pass at start covers every dispute, and a failed pass is simply run again.
 *
 * Repeats are harmless: a status row is the same row every time (its `changed_at` is
 * the dispute's `created_at` or `resolved_at`, never the time of writing), and the
 * store folds rows about one receipt with a resolution outranking `open`.
 *
 * What was written is remembered in memory only (at most DISPUTE_LIMITS.total
 * entries); a restart writes every dispute's state once more, which is harmless.
 */
export class DisputeSync {
  readonly #registry: DisputeSource
  readonly #store: ReceiptStore
  readonly #onMissing: (dispute: DisputeRecord, signalId: string) => void
  /** dispute_id → the state last written to the store. */
  readonly #written = new Map<string, DisputeRecord['state']>()

  constructor(registry: DisputeSource, store: ReceiptStore, onMissing: (dispute: DisputeRecord, signalId: string) => void) {
    this.#registry = registry
    this.#store = store
    this.#onMissing = onMissing
  }

  /** Disputes whose current state is not yet on their receipts. */
  pending(): number {
    let n = 0
    for (const d of this.#registry.allDisputes()) if (this.#written.get(d.dispute_id) !== d.state) n++
    return n
  }

  /**
   * Writes the state of every dispute not yet written whose signals are all at or below
   * `recordedThrough` (the recorder's acknowledged log position: their receipts exist, or
   * retention took the signal before it was recorded). A dispute naming a signal the
   * recorder has not reached yet waits for a later pass, so its status lands beside the
   * receipt the recorder makes and takes that receipt's emitted_at. Returns how many
   * disputes still wait; throws the store's error, after which a new pass starts over.
   */
  async sync(recordedThrough: number): Promise<{ written: number; waiting: number }> {
    let rows: DisputeStatusInput[] = []
    let batch: Array<[string, DisputeRecord['state']]> = []
    let written = 0
    let waiting = 0
    const flush = async () => {
      if (rows.length > 0) await this.#store.recordDisputeStatuses(rows)
      for (const [id, state] of batch) this.#written.set(id, state)
      written += batch.length
      rows = []
      batch = []
    }
    for (const d of this.#registry.allDisputes()) {
      // Read once: the registry may resolve it while this pass awaits the store.
      const state = d.state
      if (this.#written.get(d.dispute_id) === state) continue
      if (d.signals.some((s) => s.seq > recordedThrough)) {
        waiting++
        continue
      }
      const changedAt = state === 'open' ? d.created_at : (d.resolved_at ?? d.created_at)
      for (const s of d.signals) {
        // The receipt's own emitted_at places the status row in the receipt's sorting key
        // (a signal_id accepted again later carries another one in its log record).
        const receipt = await this.#store.get(receiptIdOf(d.source_id, s.signal_id))
        if (receipt === undefined) {
          this.#onMissing(d, s.signal_id)
          continue
        }
        rows.push({ source_id: d.source_id, signal_id: s.signal_id, emitted_at: receipt.emitted_at, dispute_status: STATUS[state], changed_at: changedAt })
      }
      batch.push([d.dispute_id, state])
      if (rows.length >= ROWS_PER_WRITE) await flush()
    }
    await flush()
    return { written, waiting }
  }
}
