import { connect, type Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'

/**
 * One HTTP/1.1 GET over a plain socket, read at the pace the test sets (pause, resume,
 * trickle), with the chunked body decoded as it comes: what a slow or stalled client sees,
 * byte for byte, which fetch hides (it reads as fast as it can and reports a cut body only
 * as an error). `complete` is true once the final (zero) chunk arrived; a transfer closed
 * before it is incomplete.
 */
export class RawHttpReader {
  readonly socket: Socket
  status = 0
  complete = false
  closed = false
  /** The framing broke: a chunk size line or a chunk end that is not what HTTP says. */
  malformed: string | undefined
  bodyBytes = 0
  lastByteAt = Date.now()
  #buf: Buffer = Buffer.alloc(0)
  #state: 'head' | 'size' | 'data' | 'trailer' | 'done' = 'head'
  #need = 0
  readonly #parts: Buffer[] = []

  private constructor(socket: Socket) {
    this.socket = socket
    socket.on('data', (data: Buffer) => {
      this.lastByteAt = Date.now()
      this.#buf = this.#buf.length === 0 ? data : Buffer.concat([this.#buf, data])
      this.#parse()
    })
    socket.on('close', () => {
      this.closed = true
    })
    socket.on('error', () => {})
  }

  static async get(port: number, path: string, headers: Record<string, string>): Promise<RawHttpReader> {
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    const lines = Object.entries({ host: `127.0.0.1:${port}`, ...headers }).map(([k, v]) => `${k}: ${v}\r\n`)
    socket.write(`GET ${path} HTTP/1.1\r\n${lines.join('')}\r\n`)
    return new RawHttpReader(socket)
  }

  /** The decoded body so far. */
  body(): Buffer {
    return Buffer.concat(this.#parts)
  }

  /** Reads one socket read (up to 64 KB) every `gapMs`: a reader slower than the server. */
  trickle(gapMs: number): void {
    this.socket.on('data', () => {
      this.socket.pause()
      setTimeout(() => this.socket.resume(), gapMs)
    })
    this.socket.resume()
  }

  /**
   * Waits until the body is complete, the connection closed or broke its framing, or no
   * byte came for `stallMs` while the socket was being read: 'stalled'.
   */
  async ended(stallMs: number): Promise<'complete' | 'closed' | 'malformed' | 'stalled'> {
    for (;;) {
      if (this.complete) return 'complete'
      if (this.malformed !== undefined) return 'malformed'
      if (this.closed) return 'closed'
      if (Date.now() - this.lastByteAt > stallMs) return 'stalled'
      await sleep(50)
    }
  }

  #parse(): void {
    for (;;) {
      if (this.#state === 'head') {
        const end = this.#buf.indexOf('\r\n\r\n')
        if (end < 0) return
        this.status = Number(this.#buf.subarray(0, end).toString('latin1').split(' ')[1])
        this.#buf = this.#buf.subarray(end + 4)
        this.#state = 'size'
      } else if (this.#state === 'size') {
        const end = this.#buf.indexOf('\r\n')
        if (end < 0) return
        const line = this.#buf.subarray(0, end).toString('latin1')
        if (!/^[0-9a-fA-F]{1,8}$/.test(line)) return this.#broken(`chunk size line ${JSON.stringify(line.slice(0, 20))}`)
        this.#need = parseInt(line, 16)
        this.#buf = this.#buf.subarray(end + 2)
        this.#state = this.#need === 0 ? 'trailer' : 'data'
      } else if (this.#state === 'data') {
        if (this.#buf.length < this.#need + 2) return
        if (this.#buf[this.#need] !== 13 || this.#buf[this.#need + 1] !== 10) return this.#broken('no CRLF after chunk data')
        this.#parts.push(Buffer.from(this.#buf.subarray(0, this.#need)))
        this.bodyBytes += this.#need
        this.#buf = this.#buf.subarray(this.#need + 2)
        this.#state = 'size'
      } else if (this.#state === 'trailer') {
        if (this.#buf.length < 2) return
        this.complete = true
        this.#state = 'done'
        return
      } else return
    }
  }

  #broken(what: string): void {
    this.malformed = `${what} after ${this.bodyBytes} body bytes`
    this.#state = 'done'
  }
}
