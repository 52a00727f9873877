/**
 * Waits between attempts at a store that failed: exponential from `baseMs`, doubled per
 * failure up to `maxMs`, with half of each wait random ("equal jitter") so that gateways
 * restarted together do not hit a recovering ClickHouse in step.
 */
export interface BackoffOptions {
  readonly baseMs: number
  readonly maxMs: number
  /** [0, 1); Math.random by default. */
  readonly random?: () => number
}

export class Backoff {
  readonly #o: BackoffOptions
  #failures = 0

  constructor(options: BackoffOptions) {
    if (!(options.baseMs > 0) || !(options.maxMs >= options.baseMs)) throw new RangeError('backoff: 0 < baseMs <= maxMs')
    this.#o = options
  }

  /** Failures since the last success. */
  get failures(): number {
    return this.#failures
  }

  /**
   * The wait before the next attempt, counting one more failure. `slow` (an error a retry
   * is not expected to fix soon) goes straight to the longest wait.
   */
  next(slow = false): number {
    this.#failures++
    const ceiling = slow ? this.#o.maxMs : Math.min(this.#o.maxMs, this.#o.baseMs * 2 ** Math.min(this.#failures - 1, 30))
    const random = this.#o.random ?? Math.random
    return Math.round(ceiling / 2 + (ceiling / 2) * random())
  }

  reset(): void {
    this.#failures = 0
  }
}
