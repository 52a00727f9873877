/**
 * Pull requests to a JetStream consumer, sent raw over one inbox subscription, since the
 * v3 client's `fetch` waits for a full batch or `expires` and refuses `expires` under
 * 1 s, while the log's `fetch(max, expiresMs)` must resolve at the first record and
 * accept any wait down to 0.
 *
 * Delivered records queue up here in the order they arrive, which is the server's
 * delivery order (stream order) whichever request they answer, until the consumer takes
 * them. At most one drain and one waiting request are outstanding at a time; each ends
 * when its batch is delivered or a status arrives (404 nothing there, 408 expired, 409
 * refused). Measured on nats-server 2.9.10: `no_wait` delivers what is
 * there and ends at once, but when a filtered consumer has nothing of its own it answers
 * 404 without moving the consumer past the other sources' records; a request with a
 * short `expires` moves it (`no_wait` with `expires` waits the whole `expires` when
 * nothing is there).
 */
import { createInbox, nanos } from '@nats-io/transport-node'
import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node'
import type { LogRecord } from '../log.js'
import { unavailable } from './nats-errors.js'
import { sourceOf } from './stream-config.js'

/** A record as a consumer delivered it, with the subject its acknowledgement goes to. */
export interface Delivered {
  readonly record: LogRecord
  readonly reply: string
}

/** The header JetStream stores a publish's dedup id in. */
const MSG_ID = 'Nats-Msg-Id'
/** Bound on how long a request that expired may go unanswered before it counts as gone. */
const NO_WAIT_EXPIRES_MS = 5_000
/** A scan: a request that waits this briefly, long enough for the server to pass what is there. */
const SCAN_EXPIRES_MS = 10
const NOTHING = 404
const EXPIRED = 408
const REFUSED = 409

interface Outstanding {
  remaining: number
  readonly ended: () => void
}

export class PullInbox {
  readonly #nc: NatsConnection
  readonly #subject: string
  readonly #prefix: string
  /** Answers to drains (`drain`) and to waiting requests (`request`) come to inboxes of their own. */
  readonly #drainInbox = createInbox()
  readonly #waitInbox = createInbox()
  readonly #subs: Subscription[]
  readonly #queue: Delivered[] = []
  #head = 0
  #drain: Outstanding | undefined
  #wait: Outstanding | undefined
  /** Woken by every arrival and every request's end. */
  #wake: (() => void) | undefined

  constructor(nc: NatsConnection, stream: string, consumer: string, subjectPrefix: string) {
    this.#nc = nc
    this.#subject = `$JS.API.CONSUMER.MSG.NEXT.${stream}.${consumer}`
    this.#prefix = subjectPrefix
    this.#subs = [
      nc.subscribe(this.#drainInbox, { callback: (_err, msg) => this.#arrived(msg, 'drain') }),
      nc.subscribe(this.#waitInbox, { callback: (_err, msg) => this.#arrived(msg, 'wait') }),
    ]
  }

  /** Messages delivered and not taken yet. */
  get queued(): number {
    return this.#queue.length - this.#head
  }

  /** True while a waiting request may still deliver. */
  get waiting(): boolean {
    return this.#wait !== undefined
  }

  peek(): Delivered | undefined {
    return this.#queue[this.#head]
  }

  shift(): Delivered | undefined {
    const d = this.#queue[this.#head]
    if (d === undefined) return undefined
    this.#queue[this.#head++] = undefined as unknown as Delivered
    if (this.#head === this.#queue.length) {
      this.#queue.length = 0
      this.#head = 0
    }
    return d
  }

  /**
   * Asks for up to `batch` records that are there now, and waits until the answer is
   * complete. Rejects `unavailable` when the server does not answer within `timeoutMs`.
   * A `scan` also moves a filtered consumer's position past other sources' records when
   * none of its own is there, at the cost of a 10 ms wait.
   *
   * When it resolves, every record stored before it was asked for is in the queue (or
   * was taken), even with a waiting request outstanding that such a record went to: the
   * server sends a consumer's deliveries and its answers to pull requests through one
   * ordered queue, and the client hands both inboxes' messages over in the order they
   * came (the contract's test of an aborted fetch followed by a fetch with 0 wait checks it).
   */
  async drain(batch: number, timeoutMs: number, scan = false): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        if (this.#drain === out) this.#drain = undefined
        reject(unavailable('a pull request'))
      }, timeoutMs)
      const out: Outstanding = { remaining: batch, ended: () => { clearTimeout(timer); resolve() } }
      this.#drain = out
      this.#send(this.#drainInbox, scan ? { batch, expires: nanos(SCAN_EXPIRES_MS) } : { batch, no_wait: true })
    })
  }

  /** Leaves a request on the server that delivers up to `batch` records as they are appended, for `expiresMs`. */
  request(batch: number, expiresMs: number): void {
    if (this.#wait !== undefined) return
    const out: Outstanding = { remaining: batch, ended: () => undefined }
    this.#wait = out
    // The server drops an expired request with a 408; this bound keeps a lost one from blocking later requests.
    const timer = setTimeout(() => {
      if (this.#wait === out) this.#end('wait')
    }, expiresMs + NO_WAIT_EXPIRES_MS)
    timer.unref()
    this.#send(this.#waitInbox, { batch, expires: nanos(Math.max(1, Math.ceil(expiresMs))) })
  }

  /** Resolves at the next arrival or request end, after `ms`, or when `signal` aborts. */
  next(ms: number, signals: readonly AbortSignal[]): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        for (const s of signals) s.removeEventListener('abort', done)
        if (this.#wake === done) this.#wake = undefined
        resolve()
      }
      const timer = setTimeout(done, ms)
      for (const s of signals) s.addEventListener('abort', done, { once: true })
      if (signals.some((s) => s.aborted)) return done()
      this.#wake = done
    })
  }

  close(): void {
    for (const sub of this.#subs) sub.unsubscribe()
    this.#end('drain')
    this.#end('wait')
  }

  #send(inbox: string, body: object): void {
    this.#nc.publish(this.#subject, JSON.stringify(body), { reply: inbox })
  }

  #arrived(msg: Msg, kind: 'drain' | 'wait'): void {
    const code = msg.headers?.code ?? 0
    if (code !== 0 || msg.reply === undefined || msg.reply === '') {
      // Status: 404 / 408 / 409 end the request; 100 (heartbeats) are not asked for.
      if (code === NOTHING || code === EXPIRED || code === REFUSED) this.#end(kind)
      return
    }
    this.#queue.push({ record: this.#recordOf(msg), reply: msg.reply })
    const out = kind === 'drain' ? this.#drain : this.#wait
    if (out !== undefined && --out.remaining <= 0) this.#end(kind)
    else this.#wake?.()
  }

  #end(kind: 'drain' | 'wait'): void {
    const out = kind === 'drain' ? this.#drain : this.#wait
    if (kind === 'drain') this.#drain = undefined
    else this.#wait = undefined
    out?.ended()
    this.#wake?.()
  }

  #recordOf(msg: Msg): LogRecord {
    const meta = ackMeta(msg.reply!)
    return {
      seq: meta.seq,
      dedupId: msg.headers?.get(MSG_ID) ?? '',
      sourceId: sourceOf(this.#prefix, msg.subject),
      time: meta.time,
      data: msg.data,
    }
  }
}

/**
 * The stream seq and store time a delivered message's ack subject carries:
 * `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>`,
 * with a domain and an account hash after `$JS.ACK` on newer servers (12 tokens).
 */
export function ackMeta(reply: string): { seq: number; time: number } {
  const t = reply.split('.')
  const base = t.length === 9 ? 5 : 7
  const ns = t[base + 2]!
  return { seq: Number(t[base]), time: ns.length > 6 ? Number(ns.slice(0, -6)) : 0 }
}
