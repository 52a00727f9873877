/**
 * Room in a store that every source shares (live nonces, dedup entries, verification
 * slots), counted per holder (a source, as a small integer or its id). Three bounds,
 * checked in this order:
 *
 * - `holder_full`: a holder keeps at most its share of the store (a quarter unless
 *   told otherwise), and at most the cap the caller derives from its max_rate. That is
 *   its own excess, answered as such.
 * - `store_full`: all holders together stay within `max`.
 * - The last eighth is kept for light holders: once the store is that full, only a
 *   holder keeping less than a thirty-second of it may add (`store_full` for the
 *   others). Four sources at their full quarter share could otherwise fill the store
 *   and shut out every small one; with the reserve they stop at seven eighths, and the
 *   last eighth still takes at least four light sources whole.
 */
export type Room = 'ok' | 'holder_full' | 'store_full'

export class SharedRoom<Holder = number> {
  readonly #max: number
  readonly #maxPerHolder: number
  readonly #reserveFrom: number
  readonly #light: number
  /** Holders with nothing held are deleted, so the map is as large as the holders that hold. */
  readonly #held = new Map<Holder, number>()
  #total = 0

  constructor(options: { max: number; maxPerHolderShare?: number }) {
    this.#max = options.max
    this.#maxPerHolder = Math.max(1, Math.floor(options.max * (options.maxPerHolderShare ?? 1 / 4)))
    this.#reserveFrom = options.max - options.max / 8
    this.#light = Math.max(1, options.max / 32)
  }

  get total(): number {
    return this.#total
  }

  held(holder: Holder): number {
    return this.#held.get(holder) ?? 0
  }

  /** Whether `holder` may add `n` entries, keeping at most `holderCap` of its own. */
  room(holder: Holder, n: number, holderCap = Infinity): Room {
    const after = this.held(holder) + n
    if (after > Math.min(holderCap, this.#maxPerHolder)) return 'holder_full'
    const total = this.#total + n
    if (total > this.#max) return 'store_full'
    if (total > this.#reserveFrom && after > this.#light) return 'store_full'
    return 'ok'
  }

  /** Counts `n` entries of `holder`: stored ones, or ones promised to a request under way. */
  added(holder: Holder, n = 1): void {
    this.#held.set(holder, this.held(holder) + n)
    this.#total += n
  }

  removed(holder: Holder, n = 1): void {
    const left = this.held(holder) - n
    if (left === 0) this.#held.delete(holder)
    else this.#held.set(holder, left)
    this.#total -= n
  }
}
