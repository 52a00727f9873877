import { STATUS_CODES } from 'node:http'
import type { ApiError } from '../../schemas/index.js'
import type { HttpResponse } from './uws.js'

/**
 * The challenge of a refused signed push: the scheme (Ed25519 over the signing string:
 * method, path, timestamp, nonce and body hash) and the headers that carry it, so a
 * client sees what to send.
 */
export const INGEST_CHALLENGE = 'Svc-Ed25519 realm="signals", headers="X-Svc-Source-Id X-Svc-Key-Id X-Svc-Timestamp X-Svc-Nonce X-Svc-Signature"'

/**
 * The status line of each status the service sends, with its reason phrase (RFC 9110's,
 * as Node lists them): a client or proxy that logs the line sees `204 No Content`.
 */
const STATUS_LINES = new Map<number, string>(Object.entries(STATUS_CODES).map(([code, reason]) => [Number(code), `${code} ${reason ?? ''}`]))
const statusLine = (status: number): string => STATUS_LINES.get(status) ?? `${status} Unknown`

/**
 * One response in flight. uWS frees a response once the client goes away, and any
 * later call on it crashes the process, so every write goes through `send`, which
 * checks `aborted` first and corks the writes into one syscall.
 *
 * Bodies go out with `tryEnd`, not `end`: `end` copies whatever the socket cannot take
 * into an unbounded buffer, so a client that pipelines requests and never reads the
 * answers (a thousand `GET /v1/openapi.json` per write) grew the process by gigabytes.
 * With `tryEnd` the rest waits for `onWritable`, the response stays pending, and uWS
 * closes a connection whose next pipelined request arrives while one is pending: at
 * most one unsent answer per connection, beyond what the kernel buffers.
 */
export class Reply {
  readonly res: HttpResponse
  readonly requestId: string
  /** The answer to a HEAD request: the same status and headers, never a body (RFC 9110 section 9.3.2). */
  readonly head: boolean
  aborted = false
  /** An answer was given (it may still be on its way out). */
  done = false
  /** The answer is out, or the client left: `onFinish` has run. */
  #finished = false
  status = 0
  /** Called once the answer has been handed to the socket whole, or the client left (drain counts on it). */
  onFinish: (() => void) | undefined
  /** Called once if the client goes away before the answer; gives back what the request held. */
  onAbort: (() => void) | undefined

  constructor(res: HttpResponse, requestId: string, head = false) {
    this.res = res
    this.requestId = requestId
    this.head = head
    res.onAborted(() => {
      this.aborted = true
      this.onAbort?.()
      this.#finish()
    })
  }

  #finish(): void {
    this.done = true
    if (this.#finished) return
    this.#finished = true
    const onFinish = this.onFinish
    // uWS may hold the onAborted callback, and with it this object, until the
    // connection's next request: drop the request's closures now so that what they
    // captured dies young instead of being promoted to the old generation.
    this.onFinish = undefined
    this.onAbort = undefined
    onFinish?.()
  }

  /** Sends a JSON body. `close` ends the connection, for when the request's body was not consumed. */
  send(status: number, body: unknown, headers?: Record<string, string>, close = false): void {
    if (this.done || this.aborted) return
    this.status = status
    const text = JSON.stringify(body)
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status))
      this.res.writeHeader('content-type', 'application/json')
      this.res.writeHeader('x-request-id', this.requestId)
      if (headers !== undefined) for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v)
      this.#end(text, close)
    })
  }

  /**
   * Ends the response, and finishes this reply once the socket has taken all of it. With
   * `close`, uWS closes the connection after it, so nothing piles up behind it.
   */
  #end(text: string | Buffer, close = false): void {
    this.done = true
    if (this.head) {
      // uWS 20.30 takes no arguments in endWithoutBody (with any it sends nothing), so the
      // length the GET would have is written by hand. A connection that must close gets
      // `end` with no body instead, whose Content-Length is then 0: still no body.
      if (close) this.res.end(undefined, true)
      else {
        this.res.writeHeader('content-length', String(Buffer.byteLength(text)))
        this.res.endWithoutBody()
      }
      this.#finish()
      return
    }
    if (close) {
      this.res.end(text, true)
      this.#finish()
      return
    }
    const total = Buffer.byteLength(text)
    const start = this.res.getWriteOffset()
    const [, done] = this.res.tryEnd(text, total)
    if (done) {
      this.#finish()
      return
    }
    // What the socket took is skipped on each retry.
    const bytes = typeof text === 'string' ? Buffer.from(text) : text
    this.res.onWritable((offset) => {
      if (this.aborted) return true
      const [ok, finished] = this.res.tryEnd(bytes.subarray(offset - start), total)
      if (finished) this.#finish()
      return ok
    })
  }

  /**
   * For a body the route streams itself (receipt exports): the status it wrote, and no
   * other answer from now on. `streamEnded` must follow once the stream is over (ended,
   * closed or abandoned by the client), for drain's count.
   */
  streamStarted(status: number): void {
    this.status = status
    this.done = true
  }

  streamEnded(): void {
    this.#finish()
  }

  /** A non-JSON body (the metrics page, the web pages and their scripts), with `headers` besides its type. */
  sendText(status: number, contentType: string, text: string | Buffer, headers?: Record<string, string>): void {
    if (this.done || this.aborted) return
    this.status = status
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status))
      this.res.writeHeader('content-type', contentType)
      this.res.writeHeader('x-request-id', this.requestId)
      if (headers !== undefined) for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v)
      this.#end(text)
    })
  }

  /** A text or binary body with headers of its own (the receipt log's checkpoint and tiles, with their caching). */
  sendBody(status: number, contentType: string, body: string | Buffer, headers: Record<string, string> = {}): void {
    if (this.done || this.aborted) return
    this.status = status
    this.res.cork(() => {
      this.res.writeStatus(statusLine(status))
      this.res.writeHeader('content-type', contentType)
      this.res.writeHeader('x-request-id', this.requestId)
      for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v)
      this.#end(body)
    })
  }

  /**
   * The error body (`ok: false`; code, message, request_id), with the headers HTTP asks
   * of some statuses: Retry-After on 429 and 503 (RFC 6585), Allow on 405, and on every
   * 401 the WWW-Authenticate challenge RFC 9110 section 11.6.1 requires: `Bearer` for the
   * control plane's token, and for ingest the signed-request scheme `Svc-Ed25519` (its
   * cause is the body's code).
   */
  fail(error: ApiError, close = false): void {
    let headers: Record<string, string> | undefined
    if (error.retryAfter !== undefined) headers = { 'retry-after': String(error.retryAfter) }
    else if (error.allow !== undefined) headers = { allow: error.allow }
    else if (error.code === 'unauthorized') headers = { 'www-authenticate': 'Bearer' }
    else if (error.status === 401) headers = { 'www-authenticate': INGEST_CHALLENGE }
    this.send(error.status, { ok: false, error: { code: error.code, message: error.message, request_id: this.requestId } }, headers, close)
  }
}
