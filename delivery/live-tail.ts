import type { LogConsumer, LogRecord, LostRange, SignalLog } from '../pipeline/index.js'

/** The log consumer that feeds the streams of this process; recreated at each start at the log's end. */
export const LIVE_CONSUMER = 'delivery-live'
const BATCH = 1024
const WAIT_MS = 30_000
/**
 * How often the tail acknowledges how far it got. Each ack rewrites the log's consumer
 * positions file durably (two fsyncs), which, once per batch, kept the disk and the
 * thread pool busy under the journal's own fsyncs; the tail's position only feeds lag
 * figures, since a stream resumes from its own event id.
 */
const ACK_EVERY_MS = 1000

/** What a stream is handed as the log grows: its source's records, in order, and lost ranges. */
export interface TailListener {
  records(records: readonly LogRecord[]): void
  lost(range: LostRange): void
}

/**
 * One tail of the signal log per process, fanned out to the open streams by source: a
 * stream adds no read of the log of its own once it is live. `position` is the last seq
 * handed to the listeners; a listener added now is handed every record after it, which is
 * how a stream joins the tail with no gap and no duplicate (it replays up to `position`
 * from the log, holding what the tail hands it meanwhile).
 *
 * The tail is a durable consumer created at the log's end at each start (durable only
 * because that is what the log offers; its position does not matter across restarts, as
 * a stream resumes from its own event id). In the embedded deployment one process owns
 * the log; a cluster would give each process its own consumer name (JetStream: an
 * ordered consumer), since processes sharing one durable consumer would split the records.
 */
export class LiveTail {
  readonly #bySource = new Map<string, Set<TailListener>>()
  readonly #all = new Set<TailListener>()
  readonly #waiters: { seq: number; resolve: () => void }[] = []
  readonly #abort = new AbortController()
  #consumer: LogConsumer | undefined
  #running: Promise<void> | undefined
  #position = 0
  #ackTimer: NodeJS.Timeout | undefined
  #toAck = 0
  readonly #onError: (err: unknown) => void

  private constructor(onError: (err: unknown) => void) {
    this.#onError = onError
  }

  /** `name`: the consumer's; a second tail in one process (webhooks without the streams' tail) needs its own. */
  static async start(log: SignalLog, onError: (err: unknown) => void, name: string = LIVE_CONSUMER): Promise<LiveTail> {
    const tail = new LiveTail(onError)
    await log.deleteConsumer(name)
    const info = await log.info()
    tail.#position = info.lastSeq
    tail.#consumer = await log.consumer(name, { startSeq: info.lastSeq + 1 })
    tail.#running = tail.#run(tail.#consumer)
    return tail
  }

  /** The last seq handed to the listeners. */
  get position(): number {
    return this.#position
  }

  /** Hands `listener` the records of `sourceId` appended after `position`, until the returned function is called. */
  listen(sourceId: string, listener: TailListener): () => void {
    let set = this.#bySource.get(sourceId)
    if (set === undefined) this.#bySource.set(sourceId, (set = new Set()))
    set.add(listener)
    this.#all.add(listener)
    return () => {
      set.delete(listener)
      if (set.size === 0 && this.#bySource.get(sourceId) === set) this.#bySource.delete(sourceId)
      this.#all.delete(listener)
    }
  }

  /** Resolves once the tail has handed out every record up to `seq` (or the tail stopped). */
  reached(seq: number): Promise<void> {
    if (this.#position >= seq || this.#abort.signal.aborted) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push({ seq, resolve }))
  }

  async #run(consumer: LogConsumer): Promise<void> {
    while (!this.#abort.signal.aborted) {
      try {
        for await (const batch of consumer.consume({ max: BATCH, expiresMs: WAIT_MS, signal: this.#abort.signal })) {
          if (batch.lost !== null) for (const l of this.#all) l.lost(batch.lost)
          this.#dispatch(batch.records)
          const last = batch.records[batch.records.length - 1]
          if (last !== undefined) {
            this.#position = last.seq
            this.#ackSoon(consumer, last.seq)
          } else if (batch.lost !== null) this.#position = Math.max(this.#position, batch.lost.toSeq)
          this.#wake()
        }
      } catch (err) {
        if (this.#abort.signal.aborted) break
        this.#onError(err)
        await new Promise((r) => setTimeout(r, 1000).unref())
      }
    }
    this.#wake(true)
  }

  #dispatch(records: readonly LogRecord[]): void {
    if (this.#bySource.size === 0) return
    // Grouped by source, so each stream gets its records as one batch (one write).
    const groups = new Map<string, LogRecord[]>()
    for (const r of records) {
      if (r.sourceId === '') {
        // Journals written before sources were tagged: every stream looks (and decodes) itself.
        for (const [source] of this.#bySource) (groups.get(source) ?? groups.set(source, []).get(source))?.push(r)
        continue
      }
      if (!this.#bySource.has(r.sourceId)) continue
      ;(groups.get(r.sourceId) ?? groups.set(r.sourceId, []).get(r.sourceId))?.push(r)
    }
    for (const [source, list] of groups) for (const l of this.#bySource.get(source) ?? []) l.records(list)
  }

  /** Acknowledged only so that the consumer's state says how far the tail got: at most once per ACK_EVERY_MS, the last seq then. */
  #ackSoon(consumer: LogConsumer, seq: number): void {
    this.#toAck = seq
    if (this.#ackTimer !== undefined) return
    this.#ackTimer = setTimeout(() => {
      this.#ackTimer = undefined
      void consumer.ack(this.#toAck).catch(() => {})
    }, ACK_EVERY_MS)
    this.#ackTimer.unref()
  }

  #wake(all = false): void {
    for (let i = this.#waiters.length - 1; i >= 0; i--) {
      const w = this.#waiters[i] as { seq: number; resolve: () => void }
      if (all || w.seq <= this.#position) {
        this.#waiters.splice(i, 1)
        w.resolve()
      }
    }
  }

  async close(): Promise<void> {
    this.#abort.abort()
    clearTimeout(this.#ackTimer)
    await this.#consumer?.close()
    await this.#running
    this.#wake(true)
  }
}
