import { connect, type Socket } from 'node:net'

/**
 * A deliberately small HTTP/1.1 keep-alive client: one request in flight per
 * connection, responses parsed only as far as the benchmark needs (status line,
 * Content-Length, Retry-After, Connection: close). fetch and undici cost several
 * times more CPU per request, and the load generator shares two cores with the
 * gateway it measures.
 */

export interface ParsedResponse {
  readonly status: number
  readonly retryAfter: boolean
  /** Head and body as text, only when the status is not 202 (errors are rare and small). */
  readonly text: string | undefined
}

export interface ConnectionHandler {
  /** The connection is open and has nothing in flight. */
  ready(conn: Connection): void
  response(conn: Connection, res: ParsedResponse, request: Buffer, startedAt: number): void
  /** The socket closed with a request in flight: no answer will come. */
  dropped(conn: Connection, request: Buffer): void
  connectError(conn: Connection, err: Error): void
}

const HEAD_END = Buffer.from('\r\n\r\n', 'latin1')
const CONTENT_LENGTH = Buffer.from('\r\ncontent-length:', 'latin1')
const RETRY_AFTER = Buffer.from('\r\nretry-after:', 'latin1')
const CONNECTION = Buffer.from('\r\nconnection:', 'latin1')
const CLOSE = Buffer.from('close', 'latin1')
const SP = 0x20
const TAB = 0x09

/** ASCII lower case of one byte. */
const lower = (b: number) => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b)

/**
 * Where the value of a header starts in `data[0, headEnd)` (after optional blanks), or
 * -1. `name` is "\r\n" + the lower-case name + ":". Works on bytes: a response is
 * parsed without creating a string, so the load generator's own garbage collection,
 * which would count as the gateway's latency, stays rare.
 */
function headerValueAt(data: Buffer, headEnd: number, name: Buffer): number {
  outer: for (let i = data.indexOf(0x0d); i >= 0 && i + name.length <= headEnd; i = data.indexOf(0x0d, i + 1)) {
    for (let j = 0; j < name.length; j++) {
      if (lower(data[i + j]!) !== name[j]) continue outer
    }
    let v = i + name.length
    while (v < headEnd && (data[v] === SP || data[v] === TAB)) v++
    return v
  }
  return -1
}

/** The decimal number at `at`, or NaN. */
function numberAt(data: Buffer, at: number, end: number): number {
  let n = 0
  let digits = 0
  for (let i = at; i < end && data[i]! >= 0x30 && data[i]! <= 0x39; i++, digits++) n = n * 10 + (data[i]! - 0x30)
  return digits === 0 ? Number.NaN : n
}

/** Whether `data` holds `word` (lower case) at `at`, in any letter case. */
function startsWithCaseless(data: Buffer, at: number, word: Buffer): boolean {
  if (at < 0 || at + word.length > data.length) return false
  for (let j = 0; j < word.length; j++) if (lower(data[at + j]!) !== word[j]) return false
  return true
}
/** After a failed connect, wait before the next try so a refused port is not a busy loop. */
const RECONNECT_DELAY_MS = 20

export class Connection {
  readonly #port: number
  readonly #handler: ConnectionHandler
  #socket: Socket | undefined
  #buffered: Buffer | undefined
  #request: Buffer | undefined
  #startedAt = 0
  #connected = false
  #stopped = false

  constructor(port: number, handler: ConnectionHandler) {
    this.#port = port
    this.#handler = handler
    this.#open()
  }

  get busy(): boolean {
    return this.#request !== undefined
  }

  /** Connected with nothing in flight: `send` may be called. */
  get ready(): boolean {
    return this.#socket !== undefined && this.#connected && this.#request === undefined
  }

  /** Writes `request`; `startedAt` (performance.now() ms) is what latency is measured from. */
  send(request: Buffer, startedAt: number): void {
    const socket = this.#socket
    if (socket === undefined || !this.ready) throw new Error('connection is not ready')
    this.#request = request
    this.#startedAt = startedAt
    socket.write(request)
  }

  /** Closes for good: no reconnect, no further callbacks. */
  stop(): void {
    this.#stopped = true
    this.#socket?.destroy()
    this.#socket = undefined
  }

  #open(): void {
    const socket = connect({ port: this.#port, host: '127.0.0.1', noDelay: true })
    this.#socket = socket
    this.#connected = false
    this.#buffered = undefined
    socket.on('connect', () => {
      this.#connected = true
      if (!this.#stopped) this.#handler.ready(this)
    })
    socket.on('data', (chunk: Buffer) => this.#onData(socket, chunk))
    socket.on('error', (err) => {
      if (!this.#connected && !this.#stopped) this.#handler.connectError(this, err)
    })
    socket.on('close', () => this.#onClose(socket))
  }

  #onClose(socket: Socket): void {
    // A close of a socket we already replaced (after Connection: close) is old news.
    if (socket !== this.#socket || this.#stopped) return
    const wasConnected = this.#connected
    const request = this.#request
    this.#request = undefined
    this.#socket = undefined
    if (request !== undefined) this.#handler.dropped(this, request)
    if (this.#stopped) return
    if (wasConnected) this.#open()
    else setTimeout(() => this.#stopped || this.#open(), RECONNECT_DELAY_MS)
  }

  #onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return
    const data = this.#buffered === undefined ? chunk : Buffer.concat([this.#buffered, chunk])
    const headEnd = data.indexOf(HEAD_END)
    if (headEnd < 0) {
      this.#buffered = data
      return
    }
    const lengthAt = headerValueAt(data, headEnd, CONTENT_LENGTH)
    const length = lengthAt < 0 ? 0 : numberAt(data, lengthAt, headEnd)
    // The gateway always sends a Content-Length: a response without one is a bug worth
    // stopping the run for, not a zero-length body to guess.
    if (Number.isNaN(length)) throw new Error(`response without a readable Content-Length: ${data.toString('latin1', 0, headEnd)}`)
    const total = headEnd + 4 + length
    if (data.length < total) {
      this.#buffered = data
      return
    }
    this.#buffered = undefined
    // "HTTP/1.1 202 Accepted": the status is always bytes 9 to 11.
    const status = (data[9]! - 48) * 100 + (data[10]! - 48) * 10 + (data[11]! - 48)
    const res: ParsedResponse = {
      status,
      retryAfter: status === 503 || status === 429 ? headerValueAt(data, headEnd, RETRY_AFTER) >= 0 : false,
      text: status === 202 ? undefined : data.toString('utf8', 0, total),
    }
    const request = this.#request
    this.#request = undefined
    const close = startsWithCaseless(data, headerValueAt(data, headEnd, CONNECTION), CLOSE)
    if (close) {
      // Open the next connection now instead of waiting for the server's FIN: the
      // server would close anyway, and a request written in between would be lost.
      socket.destroy()
      this.#open()
    }
    if (request !== undefined) this.#handler.response(this, res, request, this.#startedAt)
    if (!close && !this.#stopped && this.#socket === socket) this.#handler.ready(this)
  }
}
