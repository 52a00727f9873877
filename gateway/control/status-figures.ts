import type { ReceiptStore, SourceStats } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'

/** Sources whose figures are kept at once; past it the oldest answer is dropped. */
export const STATUS_FIGURES_KEPT_MAX = 10_000
/** Figures being computed at once, all sources together; past it a request for new ones gets 503. */
export const STATUS_FIGURES_COMPUTING_MAX = 4

interface Entry {
  readonly toMs: number
  readonly at: number
  readonly figures: Promise<SourceStats>
}

/**
 * The receipt figures of the public status, computed in ClickHouse at most once per source
 * every `ttlMs` however many ask (a public, unauthenticated read must not become a way to
 * load the store): concurrent requests share one computation, answers are kept `ttlMs`,
 * and at most STATUS_FIGURES_COMPUTING_MAX computations run at once.
 */
export class StatusFigures {
  readonly #store: ReceiptStore
  readonly #ttlMs: number
  readonly #now: () => number
  readonly #kept = new Map<string, Entry>()
  #computing = 0

  constructor(store: ReceiptStore, ttlMs: number, now: () => number) {
    this.#store = store
    this.#ttlMs = ttlMs
    this.#now = now
  }

  /** The figures of `sourceId` with hours counted within the span; a kept answer for the same span if it is fresh. */
  get(sourceId: string, span: { fromMs: number; toMs: number }): Promise<SourceStats> {
    const at = this.#now()
    const kept = this.#kept.get(sourceId)
    // A computation under way is shared whatever the TTL; a finished one only within it.
    if (kept !== undefined && kept.toMs === span.toMs && (kept.at === -1 || at - kept.at < this.#ttlMs)) return kept.figures
    if (this.#computing >= STATUS_FIGURES_COMPUTING_MAX) throw new ApiError('overloaded', 'too many source statuses being computed at once; retry', { retryAfter: 1 })
    this.#computing++
    const figures = this.#store.sourceStats(sourceId, span)
    const entry: { toMs: number; at: number; figures: Promise<SourceStats> } = { toMs: span.toMs, at: -1, figures }
    this.#kept.delete(sourceId)
    this.#kept.set(sourceId, entry)
    if (this.#kept.size > STATUS_FIGURES_KEPT_MAX) this.#kept.delete(this.#kept.keys().next().value as string)
    figures.then(
      () => {
        this.#computing--
        entry.at = this.#now()
      },
      () => {
        this.#computing--
        // A failure is not kept: the next request tries again.
        if (this.#kept.get(sourceId) === entry) this.#kept.delete(sourceId)
      },
    )
    return figures
  }
}
