import type { EventSink } from '../../delivery/index.js'
import type { DeliveryEvent } from '../../schemas/index.js'
import type { Reply } from '../http/reply.js'
import type { HttpResponse } from '../http/uws.js'

/**
 * An event stream over one uWS response. A write the socket cannot take is kept by uWS;
 * later frames wait in this sink's queue until `onWritable`. The queue is bounded by
 * `limitBytes`: a reader that falls that far behind is disconnected (it resumes from its
 * last event id), so a slow reader costs a bounded buffer and never slows the others.
 */
export class SseSink implements EventSink {
  closed = false
  #queue: string[] = []
  #queued = 0
  #blocked = false
  #waiters: (() => void)[] = []

  constructor(
    private readonly res: HttpResponse,
    private readonly reply: Reply,
    private readonly limitBytes: number,
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
    const ok = this.#write(`id: ${event.event_id}\nevent: ${event.event}\ndata: ${JSON.stringify(event)}\n\n`)
    if (ok) this.onSent()
    return ok
  }

  /** A comment line: keeps proxies and the client from taking a quiet stream for a dead one. */
  ping(): void {
    // Skipped while frames wait: the connection is not idle, and the ping would only add to the queue.
    if (!this.#blocked) this.#write(': ping\n\n')
  }

  writable(): Promise<void> {
    if (!this.#blocked || this.closed) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push(resolve))
  }

  end(): void {
    if (this.closed) return
    this.closed = true
    // What waits in the queue goes first; the response ends after it.
    const rest = this.#queue.join('')
    this.#queue = []
    this.res.cork(() => this.res.end(rest))
    this.#finish()
  }

  /** The client went away (uWS's onAborted): nothing more may touch the response. */
  aborted(): void {
    this.closed = true
    this.#finish()
  }

  #write(text: string): boolean {
    if (this.closed) return false
    if (this.#blocked) {
      this.#queue.push(text)
      this.#queued += Buffer.byteLength(text)
      if (this.#queued > this.limitBytes) {
        this.onSlow()
        this.closed = true
        this.#queue = []
        this.res.close()
        this.#finish()
        return false
      }
      return true
    }
    let ok = true
    this.res.cork(() => {
      ok = this.res.write(text)
    })
    if (!ok) {
      this.#blocked = true
      this.res.onWritable(() => this.#drain())
    }
    return true
  }

  #drain(): boolean {
    if (this.closed) return true
    this.#blocked = false
    while (this.#queue.length > 0) {
      const text = this.#queue.shift() as string
      this.#queued -= Buffer.byteLength(text)
      if (!this.res.write(text)) {
        this.#blocked = true
        return true
      }
    }
    for (const w of this.#waiters.splice(0)) w()
    return true
  }

  #finish(): void {
    for (const w of this.#waiters.splice(0)) w()
    this.reply.streamEnded()
    this.onClosed()
  }
}
