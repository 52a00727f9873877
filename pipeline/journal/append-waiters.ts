/**
 * Fetches waiting for an append. The journal wakes them after each group commit, once
 * the batch is readable: a waiting consumer costs one pending promise and one expiry
 * timer, and nothing runs on a timer while the log is idle.
 */

interface Waiter {
  readonly afterSeq: number
  readonly done: () => void
}

export class AppendWaiters {
  readonly #waiting = new Set<Waiter>()

  get size(): number {
    return this.#waiting.size
  }

  /**
   * Resolves once `wake` reports a last seq past `afterSeq` (at once if `lastSeq` already
   * is), after `ms`, or when any of `signals` aborts. Never rejects.
   */
  wait(lastSeq: number, afterSeq: number, ms: number, signals: readonly AbortSignal[]): Promise<void> {
    if (lastSeq > afterSeq || ms <= 0 || signals.some((s) => s.aborted)) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        for (const s of signals) s.removeEventListener('abort', done)
        this.#waiting.delete(waiter)
        resolve()
      }
      const waiter: Waiter = { afterSeq, done }
      const timer = setTimeout(done, ms)
      for (const s of signals) s.addEventListener('abort', done, { once: true })
      this.#waiting.add(waiter)
    })
  }

  /** Records up to `lastSeq` are readable: every fetch waiting for one of them goes on. */
  wake(lastSeq: number): void {
    for (const w of this.#waiting) if (lastSeq > w.afterSeq) w.done()
  }

  wakeAll(): void {
    for (const w of this.#waiting) w.done()
  }
}
