import type { EventSink } from '../../delivery/index.js'
import type { DeliveryEvent } from '../../schemas/index.js'
import type { Reply } from '../http/reply.js'
import type { HttpResponse } from '../http/uws.js'
import type { FlushScheduler, Flushable } from './sse-flush.js'
import { PING_FRAME, sseFrame } from './sse-frame.js'

/**
 * Queued bytes that are written at once rather than at the end of the turn: uWS's cork
 * buffer holds 16 KB, so a larger burst (a replay step) would go out in pieces anyway,
 * and writing it now keeps what waits unflushed small next to the slow-reader limit.
 */
const FLUSH_NOW_BYTES = 16 * 1024

/**
 * An event stream over one uWS response. Frames are queued and written once per
 * event-loop turn by the `FlushScheduler`, inside one cork, so a burst of events costs
 * the stream one send() rather than one per event. A write the socket cannot take is
 * kept by uWS; frames after it wait in this sink's queue until `onWritable`. The queue,
 * frames not yet flushed included, is bounded by `limitBytes`: a reader that falls that
 * far behind is disconnected (it resumes from its last event id), so a slow reader costs
 * a bounded buffer and never slows the others.
 */
export class SseSink implements EventSink, Flushable {
  closed = false
  /** Frames not yet handed to uWS, oldest first; `#head` is the first of them. */
  #frames: Buffer[] = []
  #head = 0
  #queued = 0
  /** uWS holds bytes the socket did not take: nothing more is written before `onWritable`. */
  #blocked = false
  /** onWritable is registered (once: uWS keeps it, and replacing it from inside itself is unsafe). */
  #watching = false
  /** In the scheduler's list for this turn. */
  #scheduled = false
  #finished = false
  #waiters: (() => void)[] = []

  constructor(
    private readonly res: HttpResponse,
    private readonly reply: Reply,
    private readonly limitBytes: number,
    private readonly scheduler: FlushScheduler,
    private readonly onSent: () => void,
    private readonly onSlow: () => void,
    /** Once, when the stream is over whichever way. */
    private readonly onClosed: () => void,
  ) {}

  /** The status, the headers and the reconnection hint. */
  begin(retryMs: number): void {
    this.reply.streamStarted(200)
    this.res.cork(() => {
      this.res.writeStatus('200 OK')
      this.res.writeHeader('content-type', 'text/event-stream; charset=utf-8')
      this.res.writeHeader('cache-control', 'no-cache')
      this.res.writeHeader('x-accel-buffering', 'no')
      this.res.writeHeader('x-request-id', this.reply.requestId)
      this.res.write(`retry: ${retryMs}\n\n`)
    })
  }

  send(event: DeliveryEvent): boolean {
    const ok = this.#queue(sseFrame(event))
    if (ok) this.onSent()
    return ok
  }

  /** A comment line, when nothing else is on its way: frames waiting already show the connection is alive. */
  ping(): void {
    if (!this.#blocked && this.#queued === 0) this.#queue(PING_FRAME)
  }

  /** Resolves once everything sent has been handed to uWS and the socket takes more (or the stream is over). */
  writable(): Promise<void> {
    if (this.closed || (!this.#blocked && this.#queued === 0)) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  end(): void {
    if (this.closed) return
    this.closed = true
    // What waits in the queue goes first; the response ends after it.
    const rest = this.#take()
    this.res.cork(() => this.res.end(rest))
    this.#finish()
  }

  /** The client went away (uWS's onAborted): nothing more may touch the response. */
  aborted(): void {
    this.closed = true
    this.#clear()
    this.#finish()
  }

  /** The scheduler's turn: everything queued, in one cork, until the socket pushes back. */
  flush(): void {
    this.#scheduled = false
    if (this.closed || this.#blocked) return
    this.res.cork(() => this.#writeQueued())
    if (!this.#blocked) this.#wakeWaiters()
  }

  #queue(frame: Buffer): boolean {
    if (this.closed) return false
    this.#frames.push(frame)
    this.#queued += frame.length
    if (!this.#blocked && this.#queued >= FLUSH_NOW_BYTES) this.res.cork(() => this.#writeQueued())
    if (this.#queued > this.limitBytes) {
      this.#cut()
      return false
    }
    if (!this.#blocked && this.#queued > 0 && !this.#scheduled) {
      this.#scheduled = true
      this.scheduler.add(this)
    }
    return true
  }

  /** Hands queued frames to uWS until one is refused (uWS keeps that one's unsent part); the rest waits for onWritable. */
  #writeQueued(): boolean {
    while (this.#head < this.#frames.length) {
      const frame = this.#frames[this.#head] as Buffer
      this.#head++
      this.#queued -= frame.length
      if (!this.res.write(frame)) {
        this.#compact()
        this.#blocked = true
        if (!this.#watching) {
          this.#watching = true
          this.res.onWritable(() => this.#drain())
        }
        return false
      }
    }
    this.#frames = []
    this.#head = 0
    return true
  }

  /** uWS's onWritable: false tells uWS a write just failed, so it does not try to send again itself. */
  #drain(): boolean {
    if (this.closed || !this.#blocked) return true
    let wrote = true
    this.res.cork(() => {
      this.#blocked = false
      wrote = this.#writeQueued()
    })
    if (wrote) this.#wakeWaiters()
    return wrote
  }

  /** The reader is too far behind: disconnect; it resumes from its last event id. */
  #cut(): void {
    this.onSlow()
    this.closed = true
    this.#clear()
    this.res.close()
    this.#finish()
  }

  /** Empties the queue, returning what it held. */
  #take(): Buffer {
    const rest = this.#head === 0 ? this.#frames : this.#frames.slice(this.#head)
    this.#clear()
    return rest.length === 1 ? (rest[0] as Buffer) : Buffer.concat(rest)
  }

  #clear(): void {
    this.#frames = []
    this.#head = 0
    this.#queued = 0
  }

  #compact(): void {
    if (this.#head === 0) return
    this.#frames = this.#frames.slice(this.#head)
    this.#head = 0
  }

  #wakeWaiters(): void {
    if (this.#waiters.length > 0) for (const w of this.#waiters.splice(0)) w()
  }

  #finish(): void {
    this.#wakeWaiters()
    if (this.#finished) return
    this.#finished = true
    this.reply.streamEnded()
    this.onClosed()
  }
}
