/**
 * A durable consumer of the JetStream log: a JetStream pull consumer with AckPolicy.All,
 * pulled raw (pull-inbox.ts). The server holds the acknowledged position and does the
 * source filtering; this side holds what the contract adds:
 *
 * - Loss: JetStream moves a consumer past records that retention (or a purge) removed
 *   without a word, so the consumer compares. For a consumer of every source a delivered
 *   seq past the next expected one is exactly the range removed (seqs have no gaps); for
 *   a filtered one such a jump is normal (other sources' records), and the stream's first
 *   seq tells how much of it was removed, which costs one stream info request per batch
 *   that jumps. At the first fetch after opening, the first seq is checked once too, for a
 *   consumer whose next record of its own never comes.
 * - `nak` hands out again, from memory, the records handed out since the last ack: the
 *   server would only redeliver them one by one after `ack_wait`. Redeliveries the server
 *   makes on its own (after `ack_wait`) are dropped for the same reason.
 * - A filtered consumer's position moves past the other sources' records it skipped
 *   when nothing of its own is unacknowledged: the server scans past them on every pull
 *   (`delivered.stream_seq`), and an ack or an empty fetch reads that back.
 */
import type { ConsumeOptions, FetchResult, LogConsumer, LogRecord, LostRange } from '../log.js'
import { LogError } from '../log-error.js'
import { checkAckSeq, checkFetchArgs, consumeBatches } from '../journal/signal-log-base.js'
import type { Delivered, PullInbox } from './pull-inbox.js'

/** What the consumer needs of the log; each call runs as an operation of the open log. */
export interface JetStreamConsumerHost {
  requestTimeoutMs(): number
  /** The stream's first seq now (the last seq + 1 when it holds nothing). */
  firstSeq(): Promise<number>
  /** The server's position of this consumer when nothing of its own is unacknowledged, else null. */
  scannedThrough(name: string): Promise<number | null>
  /** Sends an ack to `reply` and resolves once the server has stored it. */
  ack(reply: string): Promise<void>
  /** Rejects `unavailable` at once while the connection is down. */
  checkConnected(): void
  run<T>(op: () => Promise<T>): Promise<T>
  released(consumer: JetStreamConsumer): void
}

const EMPTY: FetchResult = Object.freeze({ records: Object.freeze([]) as readonly LogRecord[], lost: null })

export class JetStreamConsumer implements LogConsumer {
  readonly name: string
  readonly sourceId: string | null
  readonly #host: JetStreamConsumerHost
  readonly #inbox: PullInbox
  readonly #closer = new AbortController()
  #closed = false
  #acked: number
  /** Next seq to look at: every seq below it was handed out, skipped by the filter, or reported lost. */
  #next: number
  /** Handed out since the last ack, in seq order: for `nak`, and the subject each ack goes to. */
  #unacked: Delivered[] = []
  /** What `nak` asked to hand out again, and how far that got. */
  #replay: Delivered[] = []
  #replayAt = 0
  #firstFetch = true
  #fetching: Promise<unknown> = Promise.resolve()
  readonly #acks = new Set<Promise<void>>()

  constructor(host: JetStreamConsumerHost, inbox: PullInbox, name: string, sourceId: string | null, acked: number) {
    this.#host = host
    this.#inbox = inbox
    this.name = name
    this.sourceId = sourceId
    this.#acked = acked
    this.#next = acked + 1
  }

  fetch(max: number, expiresMs: number, signal?: AbortSignal): Promise<FetchResult> {
    try {
      checkFetchArgs(max, expiresMs, signal)
    } catch (err) {
      return Promise.reject(err)
    }
    const run = this.#fetching.then(() => this.#host.run(() => this.#fetch(max, expiresMs, signal)))
    this.#fetching = run.catch(() => undefined)
    return run
  }

  async #fetch(max: number, expiresMs: number, signal: AbortSignal | undefined): Promise<FetchResult> {
    if (this.#closed) throw closedError(this.name)
    if (signal?.aborted === true) return EMPTY
    this.#host.checkConnected()
    const deadline = performance.now() + expiresMs
    const signals = signal === undefined ? [this.#closer.signal] : [this.#closer.signal, signal]
    const records: LogRecord[] = []
    let lost: LostRange | null = null
    const batch: { firstSeq?: number } = {}
    if (this.#firstFetch) {
      const first = await this.#host.firstSeq()
      this.#firstFetch = false
      if (first > this.#next) {
        lost = { fromSeq: this.#next, toSeq: first - 1, count: first - this.#next }
        this.#next = first
      }
    }
    while (records.length < max && this.#replayAt < this.#replay.length) records.push(this.#replay[this.#replayAt++]!.record)
    for (;;) {
      if (this.#closed || isAborted(signal)) return records.length > 0 || lost !== null ? { records, lost } : EMPTY
      const stopped = await this.#take(records, max, lost, (l) => (lost = l), batch)
      if (!stopped && records.length < max) {
        await this.#inbox.drain(max - records.length, this.#host.requestTimeoutMs())
        await this.#take(records, max, lost, (l) => (lost = l), batch)
      }
      if (records.length > 0 || lost !== null) return { records, lost }
      const left = deadline - performance.now()
      if (left <= 0) {
        await this.#skipAhead()
        return EMPTY
      }
      this.#inbox.request(max, left)
      await this.#inbox.next(left, signals)
      batch.firstSeq = undefined
      // Records of one batch arrive back to back: let the rest of it in before taking.
      await new Promise((resolve) => setImmediate(resolve))
    }
  }

  /**
   * Moves delivered records from the inbox into `records`, telling a loss before them.
   * True when it stopped at a jump it must not pass in this batch.
   */
  async #take(records: LogRecord[], max: number, lost: LostRange | null, setLost: (l: LostRange) => void, batch: { firstSeq?: number }): Promise<boolean> {
    for (;;) {
      if (records.length >= max) return true
      const d = this.#inbox.peek()
      if (d === undefined) return false
      const seq = d.record.seq
      if (seq < this.#next) {
        // Redelivered by the server after ack_wait: handed out already, or acknowledged.
        this.#inbox.shift()
        continue
      }
      if (seq > this.#next) {
        // For a filtered consumer a jump is mostly other sources' records: only those
        // before the stream's first seq were removed. Asked once per fetch.
        if (this.sourceId !== null && batch.firstSeq === undefined) batch.firstSeq = await this.#host.firstSeq()
        const removedTo = this.sourceId === null ? seq : Math.min(seq, batch.firstSeq!)
        if (removedTo > this.#next) {
          // A loss is told before the records after it, in a result of its own.
          if (records.length > 0 || lost !== null) return true
          lost = { fromSeq: this.#next, toSeq: removedTo - 1, count: removedTo - this.#next }
          setLost(lost)
        }
        this.#next = seq
        // The inbox may have moved on while the first seq was asked for: look again.
        continue
      }
      this.#inbox.shift()
      this.#next = seq + 1
      records.push(d.record)
      this.#unacked.push(d)
    }
  }

  /** A filtered consumer with nothing unacknowledged takes the server's scan as its position (best effort). */
  async #skipAhead(): Promise<void> {
    if (this.sourceId === null || this.#unacked.length > 0 || this.#replayAt < this.#replay.length) return
    try {
      await this.#inbox.drain(1, this.#host.requestTimeoutMs(), true)
      // A record of its own that came with the scan is handed out by the next fetch.
      if (this.#inbox.queued > 0) return
      const through = await this.#host.scannedThrough(this.name)
      if (through !== null && through > this.#acked && this.#unacked.length === 0) {
        this.#acked = through
        if (through + 1 > this.#next) this.#next = through + 1
      }
    } catch {
      // The position stays where it was; the next empty fetch tries again.
    }
  }

  ack(seq: number): Promise<void> {
    try {
      checkAckSeq(seq)
      if (this.#closed) throw closedError(this.name)
      if (seq > this.#next - 1) throw new LogError('invalid_argument', `ack seq ${seq} is past the last record consumer ${this.name} was handed (${this.#next - 1})`)
    } catch (err) {
      return Promise.reject(err)
    }
    if (seq <= this.#acked) return Promise.resolve()
    const saving = this.#host.run(() => this.#ack(seq))
    this.#acks.add(saving)
    const forget = (): void => void this.#acks.delete(saving)
    saving.then(forget, forget)
    return saving
  }

  async #ack(seq: number): Promise<void> {
    this.#host.checkConnected()
    let target: Delivered | undefined
    for (const d of this.#unacked) {
      if (d.record.seq > seq) break
      target = d
    }
    if (target !== undefined) await this.#host.ack(target.reply)
    let store = seq
    const last = this.#unacked[this.#unacked.length - 1]
    if (this.sourceId !== null && (last === undefined || seq >= last.record.seq)) {
      // Past every record of its own handed out: the other sources' records it skipped
      // after them count as acknowledged too (what the server scanned, read back).
      const through = await this.#host.scannedThrough(this.name).catch(() => null)
      if (through !== null && through > store) {
        store = through
        if (through + 1 > this.#next) this.#next = through + 1
      }
    }
    if (store <= this.#acked) return
    this.#acked = store
    let drop = 0
    while (drop < this.#unacked.length && this.#unacked[drop]!.record.seq <= store) drop++
    if (drop > 0) this.#unacked = this.#unacked.slice(drop)
  }

  nak(): void {
    this.#replay = this.#unacked.slice()
    this.#replayAt = 0
  }

  position(): number {
    return this.#acked
  }

  consume(options?: ConsumeOptions): AsyncIterable<FetchResult> {
    return consumeBatches(this, options)
  }

  close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true
      this.#closer.abort()
      this.#inbox.close()
      this.#host.released(this)
    }
    return Promise.allSettled([this.#fetching, ...this.#acks]).then(() => undefined)
  }
}

function closedError(name: string): LogError {
  return new LogError('log_closed', `consumer ${name} is closed`)
}

/** Read afresh each time: an abort can come during any await. */
function isAborted(signal: AbortSignal | undefined): boolean {
  return signal !== undefined && signal.aborted
}
