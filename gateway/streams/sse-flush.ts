/** What the flush turn writes: a sink with frames queued since the last turn. */
export interface Flushable {
  flush(): void
}

/**
 * Writes the queued frames of every stream once per event-loop turn. A batch of log
 * records fans out to many streams, and a stream may get several events in one turn
 * (a group commit, a replay step): written as they come, each event would cost each
 * stream its own send() system call, which is what dominated the gateway's CPU at 1,000
 * streams. Queued and written from one `setImmediate`, each stream costs one system call
 * per turn, however many events it got, and the more the loop falls behind, the more
 * each call carries.
 */
export class FlushScheduler {
  #pending: Flushable[] = []
  #scheduled = false

  /** `onError`: a sink that threw (a bug); the other sinks of the turn are still written. */
  constructor(private readonly onError: (err: unknown) => void) {}

  /** Flushes `sink` at the end of this turn; the sink adds itself once per turn. */
  add(sink: Flushable): void {
    this.#pending.push(sink)
    if (this.#scheduled) return
    this.#scheduled = true
    setImmediate(this.#run)
  }

  readonly #run = (): void => {
    this.#scheduled = false
    const due = this.#pending
    this.#pending = []
    for (const sink of due) {
      try {
        sink.flush()
      } catch (err) {
        this.onError(err)
      }
    }
  }
}
