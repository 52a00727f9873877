import type { HttpResponse } from '../http/uws.js'

/**
 * Bytes of body one cork carries. uWS's cork buffer is 16 KB; a write that does not fit in
 * what is left of it makes uWS send the corked bytes first (here the chunk header it has
 * just corked), and when the socket refuses them uWS 20 returns without writing or keeping
 * the body bytes (AsyncSocket::uncork): the client would get a chunk header whose data
 * never comes, and wait for it forever. So each cork gets one slice that fits with room to
 * spare for the chunk header (CRLF, hex size, CRLF) and, on the first write, the
 * Transfer-Encoding, Date and uWebSockets header lines uWS adds.
 */
const SLICE_BYTES = 16 * 1024 - 256

/** Why a body ended before its last byte went out. */
export type CutReason = 'idle'

/**
 * A chunked response body written to one uWS response as its reader takes it, with
 * backpressure to the producer: `write` resolves once the chunk has been handed to uWS and
 * the socket takes more, so the producer pulls its next chunk only then.
 *
 * The rules it keeps, each against a way uWS 20 loses a body:
 * - A cork never holds more than fits (see SLICE_BYTES), so no bytes are dropped.
 * - `onWritable` is registered once for the response's life, with one callback that holds
 *   no state of a particular wait: it reads the writer's, notes that the socket drained and
 *   schedules the next writes with `setImmediate`, outside uWS's callback. uWS runs
 *   the callback through node::MakeCallback, which runs the microtasks queued by it before
 *   returning to uWS; and uWS (HttpResponseData::callOnWritable) puts the callback it was
 *   running back in place once it returns, over any callback registered meanwhile. A wait
 *   that registered its own callback per refusal, resumed in those microtasks, and was
 *   refused again at once (a Parquet file read ahead from disk needs no I/O between two
 *   chunks) had its new callback overwritten by the spent one: it waited for a call that
 *   never came, the socket idle, the client waiting for the rest of the body, the export's
 *   slot held for good.
 * - A reader that takes nothing for `idleMs` while the socket is full is cut: the
 *   connection is closed before the final chunk, so the client sees an incomplete chunked
 *   body, and `onCut` reports it. An export never hangs silently.
 */
export class ChunkedBodyWriter {
  /** Bytes of the current chunk not yet handed to uWS. */
  #rest: Uint8Array = new Uint8Array(0)
  /** uWS holds bytes the socket refused: nothing more is written before onWritable. */
  #blocked = false
  #watching = false
  #scheduled = false
  #closed = false
  #waiter: ((written: boolean) => void) | undefined
  #idle: NodeJS.Timeout | undefined

  constructor(
    private readonly res: HttpResponse,
    private readonly idleMs: number,
    /** Once, when the body is cut; the connection is already closed. */
    private readonly onCut: (reason: CutReason) => void,
  ) {}

  /**
   * Hands `chunk` to the connection. Resolves true once all of it is with uWS and the socket
   * takes more; false if the body ended first (cut, or `close`d because the client left):
   * then nothing more may be written.
   */
  write(chunk: Uint8Array): Promise<boolean> {
    if (this.#closed) return Promise.resolve(false)
    this.#rest = chunk
    return new Promise((resolve) => {
      this.#waiter = resolve
      if (!this.#blocked) this.#pump()
    })
  }

  /** The final chunk: the body is whole. uWS sends what it still holds, then the end. */
  end(): void {
    if (this.#closed) return
    this.#stop()
    this.res.cork(() => this.res.end())
  }

  /** The response is over without an end (the client left, or the route closed it): nothing more is written. */
  close(): void {
    if (this.#closed) return
    this.#stop()
    this.#settle(false)
  }

  /** Slices of the current chunk, a cork each, until it is all handed over or the socket refuses one. */
  #pump(): void {
    this.#scheduled = false
    if (this.#closed || this.#blocked) return
    while (this.#rest.length > 0) {
      const slice = this.#rest.subarray(0, SLICE_BYTES)
      this.#rest = this.#rest.subarray(slice.length)
      let taken = true
      this.res.cork(() => {
        taken = this.res.write(slice)
      })
      // A refused slice is kept by uWS, as is one refused at the end of its cork, which
      // shows as the next slice's refusal (uWS keeps that one too): nothing is lost.
      if (!taken) return this.#block()
    }
    this.#settle(true)
  }

  #block(): void {
    this.#blocked = true
    if (!this.#watching) {
      this.#watching = true
      this.res.onWritable(this.#writable)
    }
    this.#idle = setTimeout(this.#cut, this.idleMs)
  }

  /** uWS's onWritable: the reader took bytes. The writes wait for setImmediate, outside uWS's callback. */
  readonly #writable = (): boolean => {
    if (this.#closed || !this.#blocked) return true
    this.#blocked = false
    clearTimeout(this.#idle)
    if (!this.#scheduled) {
      this.#scheduled = true
      setImmediate(() => this.#pump())
    }
    return true
  }

  readonly #cut = (): void => {
    if (this.#closed) return
    this.#stop()
    this.onCut('idle')
    this.res.close()
    this.#settle(false)
  }

  #stop(): void {
    this.#closed = true
    this.#rest = new Uint8Array(0)
    clearTimeout(this.#idle)
  }

  #settle(written: boolean): void {
    const waiter = this.#waiter
    this.#waiter = undefined
    waiter?.(written)
  }
}
