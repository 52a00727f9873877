import type { EventSink, StreamDisconnectReason } from '../../delivery/index.js'
import type { DeliveryEvent } from '../../schemas/index.js'
import type { Reply } from '../http/reply.js'
import type { HttpResponse } from '../http/uws.js'
import type { FlushScheduler, Flushable } from './sse-flush.js'
import { noticeFrame, PING_FRAME, sseFrame } from './sse-frame.js'

/**
 * Queued bytes that are written at once rather than at the end of the turn (a replay
 * step), so that what waits unflushed stays small next to the slow-reader limit.
 */
const FLUSH_NOW_BYTES = 16 * 1024

/**
 * Bytes one cork carries at most: uWS's cork buffer (16 KB). A write that does not fit in
 * what is left of it makes uWS send the corked bytes first, and when the socket cannot
 * take them uWS 20 drops that write (AsyncSocket::uncork returns before writing it): the
 * frame would be lost and the chunked body corrupted. So a cork never gets more than fits,
 * counting each write's chunk header (CRLF, up to 8 hex digits, CRLF). Events are far
 * smaller than a cork; one that is not goes alone.
 */
const CORK_BYTES = 16 * 1024
const CHUNK_HEAD_BYTES = 12

/**
 * An event stream over one uWS response. Frames are queued and written once per
 * event-loop turn by the `FlushScheduler`, inside one cork, so a burst of events costs
 * the stream one send() rather than one per event. A write the socket cannot take is
 * kept by uWS; frames after it wait in this sink's queue until `onWritable`. The queue,
 * frames not yet flushed included, is bounded by `limitBytes`: a reader that falls that
 * far behind is disconnected (it resumes from its last event id), so a slow reader costs
 * a bounded buffer and never slows the others. A reader that takes nothing at all while
 * a write waits is disconnected after the stall timeout (`checkStall`), by this sink and
 * counted, rather than left to uWS, which closes such a socket after 10 s as if the
 * client had gone.
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
  /** Heartbeat ticks since a frame was last queued. */
  #quietTicks = 0
  /** When the socket last refused a write with nothing taken since (ms), while `#blocked`. */
  #blockedSince = 0

  constructor(
    private readonly res: HttpResponse,
    private readonly reply: Reply,
    private readonly limitBytes: number,
    private readonly scheduler: FlushScheduler,
    private readonly onSent: () => void,
    /** Once, when the server closes the stream (not when the client leaves), with why. */
    private readonly onDisconnect: (reason: StreamDisconnectReason) => void,
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

  /** A frame without an `id:` line: the client's last event id, its resume point, stays where it was. */
  notice(notice: { readonly event: string }): void {
    if (this.#queue(noticeFrame(notice))) this.onSent()
  }

  /** A comment line, when nothing else is on its way: frames waiting already show the connection is alive. */
  ping(): void {
    if (!this.#blocked && this.#queued === 0) this.#queue(PING_FRAME)
  }

  /**
   * One step of the heartbeat clock, which ticks `steps` times per heartbeat interval:
   * the ping goes once the stream has been quiet for more than `steps` ticks, so the first
   * comes one interval (to a step more) after the stream opened or last sent, whatever the
   * clock's phase when it opened.
   */
  tick(steps: number): void {
    if (++this.#quietTicks > steps) this.ping()
  }

  /** Resolves once everything sent has been handed to uWS and the socket takes more (or the stream is over). */
  writable(): Promise<void> {
    if (this.closed || (!this.#blocked && this.#queued === 0)) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  end(reason: StreamDisconnectReason): void {
    if (this.closed) return
    this.closed = true
    this.onDisconnect(reason)
    // What waits in the queue goes first, a cork at a time, all of it (uWS keeps what the
    // socket does not take yet and sends it after); the response ends after it.
    while (this.#head < this.#frames.length) this.res.cork(() => this.#fillCork(false))
    this.#clear()
    this.res.cork(() => this.res.end())
    this.#finish()
  }

  /**
   * A step of the stall clock: a reader that has taken nothing for `stallMs` while a write
   * waits is disconnected (it resumes from its last event id when it reads again).
   */
  checkStall(now: number, stallMs: number): void {
    if (!this.closed && this.#blocked && now - this.#blockedSince >= stallMs) this.drop('stalled_reader')
  }

  /** Closes the connection now, dropping what waits: the reader is too slow or stalled, or the stream failed. */
  drop(reason: StreamDisconnectReason): void {
    if (this.closed) return
    this.onDisconnect(reason)
    this.closed = true
    this.#clear()
    this.res.close()
    this.#finish()
  }

  /** The client went away (uWS's onAborted): nothing more may touch the response. */
  aborted(): void {
    this.closed = true
    this.#clear()
    this.#finish()
  }

  /** The scheduler's turn: everything queued, a cork at a time, until the socket pushes back. */
  flush(): void {
    this.#scheduled = false
    if (this.closed || this.#blocked) return
    if (this.#writeCorks(Infinity)) this.#wakeWaiters()
  }

  #queue(frame: Buffer): boolean {
    if (this.closed) return false
    this.#quietTicks = 0
    this.#frames.push(frame)
    this.#queued += frame.length
    if (!this.#blocked && this.#queued >= FLUSH_NOW_BYTES) this.#writeCorks(Infinity, true)
    if (this.#queued > this.limitBytes) {
      this.drop('slow_reader')
      return false
    }
    this.#schedule()
    return true
  }

  #schedule(): void {
    if (this.#blocked || this.#queued === 0 || this.#scheduled) return
    this.#scheduled = true
    this.scheduler.add(this)
  }

  /**
   * Up to `maxCorks` corks of queued frames (only full ones with `fullOnly`: the rest goes
   * at the turn's end); true when the queue is empty and the socket took everything so far.
   */
  #writeCorks(maxCorks: number, fullOnly = false): boolean {
    for (let corks = 0; corks < maxCorks && this.#head < this.#frames.length && !this.#blocked; corks++) {
      if (fullOnly && this.#queued + (this.#frames.length - this.#head) * CHUNK_HEAD_BYTES < CORK_BYTES) break
      this.res.cork(() => this.#fillCork())
    }
    if (this.#head < this.#frames.length) {
      this.#compact()
      return false
    }
    this.#frames = []
    this.#head = 0
    return !this.#blocked
  }

  /**
   * Hands queued frames to uWS, as many as one cork holds, until one is refused (uWS keeps
   * that one; inside a cork a refusal shows at the next cork's first write, which uWS then
   * keeps too). Frames after it wait for onWritable.
   */
  #fillCork(stopWhenRefused = true): void {
    let room = CORK_BYTES
    while (this.#head < this.#frames.length) {
      const frame = this.#frames[this.#head] as Buffer
      const cost = frame.length + CHUNK_HEAD_BYTES
      if (cost > room && room < CORK_BYTES) return
      room -= cost
      this.#head++
      this.#queued -= frame.length
      if (!this.res.write(frame) && stopWhenRefused) {
        this.#blocked = true
        this.#blockedSince = Date.now()
        if (!this.#watching) {
          this.#watching = true
          this.res.onWritable(() => this.#drain())
        }
        return
      }
    }
  }

  /**
   * uWS's onWritable: one cork's worth here (uWS may hold the socket corked around this
   * callback, and more would overflow it), the rest from the next flush turn. False tells
   * uWS a write just failed, so it does not try to send again itself.
   */
  #drain(): boolean {
    if (this.closed || !this.#blocked) return true
    this.#blocked = false
    const empty = this.#writeCorks(1)
    if (this.#blocked) return false
    if (empty) this.#wakeWaiters()
    else this.#schedule()
    return true
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
