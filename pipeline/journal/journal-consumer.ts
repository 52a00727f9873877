/**
 * A durable consumer of the journal: the JetStream pull consumer with AckPolicy.All,
 * over the journal's reads. Holds a delivery position in memory (the next seq to look
 * at) and the acknowledged position on disk (`ConsumerPositions`); a restart and a
 * `nak` both start over from the acknowledged one.
 *
 * Loss is found from the reads themselves: seqs have no gaps and a read from a seq
 * returns the first record held at or after it, so a first record past the delivery
 * position, or a jump inside a batch, is exactly the range retention removed, whether
 * it ran before the read or during it.
 */
import type { ConsumeOptions, FetchResult, LogConsumer, LogRecord } from '../log.js'
import { LogError } from '../log-error.js'
import { checkAckSeq, checkFetchArgs, consumeBatches } from './signal-log-base.js'

/** What the consumer needs of the journal; each call runs as an operation of the open log. */
export interface ConsumerHost {
  /**
   * Up to `max` records from the first held at or after `fromSeq`. Records of a source
   * other than `only` (when not null) may be shared with other readers: they are looked
   * at, never handed out.
   */
  read(fromSeq: number, max: number, only: string | null): Promise<LogRecord[]>
  /** Resolves once a record past `afterSeq` is readable, after `ms`, or on either abort. */
  waitForAppend(afterSeq: number, ms: number, signals: readonly AbortSignal[]): Promise<void>
  /** Stores the acknowledged position durably. */
  savePosition(name: string, seq: number): Promise<void>
  /** Runs `op` as an operation of the log: refused once the log closes, waited for by its close. */
  run<T>(op: () => Promise<T>): Promise<T>
  /** The consumer closed: its name may be opened again. */
  released(consumer: JournalConsumer): void
}

/** Records a filtered consumer reads per step while looking for its source's. */
const SCAN_RECORDS = 1024

const EMPTY: FetchResult = Object.freeze({ records: Object.freeze([]) as readonly LogRecord[], lost: null })

export class JournalConsumer implements LogConsumer {
  readonly name: string
  readonly sourceId: string | null
  readonly #host: ConsumerHost
  /** Aborted by close: ends a waiting fetch. */
  readonly #closer = new AbortController()
  #closed = false
  /** Last acknowledged seq, durable. */
  #acked: number
  /** Next seq to look at: every seq below it was handed out, or skipped by the filter, or reported lost. */
  #next: number
  /** Seq of the last record handed out (0 if none since the last start or nak). */
  #handedOut: number
  /** Fetches run one after another. */
  #fetching: Promise<unknown> = Promise.resolve()
  readonly #acks = new Set<Promise<void>>()

  constructor(host: ConsumerHost, name: string, sourceId: string | null, acked: number) {
    this.#host = host
    this.name = name
    this.sourceId = sourceId
    this.#acked = acked
    this.#next = acked + 1
    this.#handedOut = acked
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
    const deadline = performance.now() + expiresMs
    const signals = signal === undefined ? [this.#closer.signal] : [this.#closer.signal, signal]
    for (;;) {
      if (this.#closed || signal?.aborted === true) return EMPTY
      const found = await this.#take(max, deadline)
      if (found.records.length > 0 || found.lost !== null) return found
      const left = deadline - performance.now()
      if (left <= 0) {
        await this.#skipAhead()
        return EMPTY
      }
      await this.#host.waitForAppend(this.#next - 1, left, signals)
    }
  }

  /**
   * A filtered consumer that was handed nothing since its last ack, and read past records
   * of other sources, stores that as its position, as if it had acked them: otherwise one
   * of a quiet source shows lag, and is told of losses, for records never its own. Best
   * effort: a failed write only leaves the position where it was.
   */
  async #skipAhead(): Promise<void> {
    const through = this.#next - 1
    if (this.sourceId === null || this.#handedOut > this.#acked || through <= this.#acked) return
    try {
      await this.#host.savePosition(this.name, through)
      if (through > this.#acked && this.#handedOut <= this.#acked) {
        this.#acked = through
        this.#handedOut = through
      }
    } catch {
      // Kept where it was; the next expiry tries again.
    }
  }

  /** What is there now from `#next` on: up to `max` records of this consumer's, and any loss before them. */
  async #take(max: number, deadline: number): Promise<FetchResult> {
    const records: LogRecord[] = []
    let lost: { fromSeq: number; toSeq: number; count: number } | null = null
    const step = this.sourceId === null ? max : SCAN_RECORDS
    for (;;) {
      const batch = await this.#host.read(this.#next, step, this.sourceId)
      if (batch.length === 0) break
      let stopped = false
      for (const r of batch) {
        if (r.seq !== this.#next) {
          // Retention removed [#next, r.seq). A jump after records already taken is told
          // by the next fetch, so a result's records all follow its lost range.
          if (records.length > 0 || lost !== null) {
            stopped = true
            break
          }
          lost = { fromSeq: this.#next, toSeq: r.seq - 1, count: r.seq - this.#next }
          this.#next = r.seq
        }
        this.#next = r.seq + 1
        if (this.sourceId !== null && r.sourceId !== this.sourceId) continue
        records.push(r)
        this.#handedOut = r.seq
        if (records.length >= max) {
          stopped = true
          break
        }
      }
      // A filtered consumer reads on while it has found nothing, within its wait.
      if (stopped || records.length > 0 || lost !== null || batch.length < step || performance.now() >= deadline) break
    }
    return records.length === 0 && lost === null ? EMPTY : { records, lost }
  }

  ack(seq: number): Promise<void> {
    try {
      checkAckSeq(seq)
    } catch (err) {
      return Promise.reject(err)
    }
    if (this.#closed) return Promise.reject(closedError(this.name))
    if (seq > this.#next - 1) {
      return Promise.reject(new LogError('invalid_argument', `ack seq ${seq} is past the last record consumer ${this.name} was handed (${this.#next - 1})`))
    }
    if (seq <= this.#acked) return Promise.resolve()
    // Acking the last record handed out acknowledges the records the filter skipped after
    // it too, so a consumer of a quiet source does not fall behind retention, or show lag,
    // for records that were never its own.
    const store = seq >= this.#handedOut ? this.#next - 1 : seq
    const saving = this.#host.run(() => this.#host.savePosition(this.name, store)).then(() => {
      if (store > this.#acked) this.#acked = store
    })
    this.#acks.add(saving)
    const forget = (): void => void this.#acks.delete(saving)
    saving.then(forget, forget)
    return saving
  }

  nak(): void {
    this.#next = this.#acked + 1
    this.#handedOut = this.#acked
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
      this.#host.released(this)
    }
    return Promise.allSettled([this.#fetching, ...this.#acks]).then(() => undefined)
  }
}

function closedError(name: string): LogError {
  return new LogError('log_closed', `consumer ${name} is closed`)
}
