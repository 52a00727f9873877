/** One acceptance under way: `at` once it knows the log position it follows, `release` when recorded (or failed). */
export interface DisputeHold {
  at(afterSeq: number): void
  release(): void
}

/**
 * Holds delivery back while a dispute is being accepted in this process. An accepted
 * dispute is delivered after the log record `after_seq`, the log's last when it was
 * accepted; between reading that position and the dispute being recorded (and the
 * delivery paths told), a record appended meanwhile must not reach a renter first, or
 * the dispute would land behind it in one channel and before it in a replay. So an
 * acceptance takes a hold before it reads the log's end, and the channels deliver no
 * record past the hold's position until it is released (a few milliseconds: one write
 * of the registry file).
 *
 * The gate is of this process: on the embedded backends one process holds the registry,
 * the log and the delivery (DATA_DIR's lock). Channels check it and act in the same
 * turn, which is what makes it a lock here; with shared backends, the acceptance would
 * publish its position into the log's own stream instead.
 */
export class DisputeGate {
  readonly #holds = new Set<{ floor: number | undefined }>()
  #waiters: (() => void)[] = []

  /** Takes a hold before the log's end is read: until `at`, no record beyond those already delivered may be. */
  hold(): DisputeHold {
    const entry: { floor: number | undefined } = { floor: undefined }
    this.#holds.add(entry)
    return {
      at: (afterSeq) => {
        entry.floor = afterSeq
        this.#wake()
      },
      release: () => {
        if (this.#holds.delete(entry)) this.#wake()
      },
    }
  }

  /**
   * The greatest log seq whose records may be delivered now: Infinity when no acceptance
   * is under way, undefined while one has not yet read the log's end.
   */
  ceiling(): number | undefined {
    let ceiling = Infinity
    for (const h of this.#holds) {
      if (h.floor === undefined) return undefined
      ceiling = Math.min(ceiling, h.floor)
    }
    return ceiling
  }

  /** Whether the record `seq` may be delivered now. */
  allows(seq: number): boolean {
    const c = this.ceiling()
    return c !== undefined && seq <= c
  }

  /** Resolves once the record `seq` may be delivered. */
  async until(seq: number): Promise<void> {
    while (!this.allows(seq)) await new Promise<void>((resolve) => this.#waiters.push(resolve))
  }

  /** Resolves once no ceiling is unknown: the greatest seq deliverable now, to bound a read of the log. */
  async known(): Promise<number> {
    for (;;) {
      const c = this.ceiling()
      if (c !== undefined) return c
      await new Promise<void>((resolve) => this.#waiters.push(resolve))
    }
  }

  #wake(): void {
    const waiters = this.#waiters
    this.#waiters = []
    for (const w of waiters) w()
  }
}
