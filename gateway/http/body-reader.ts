import type { HttpResponse } from './uws.js'

export interface BodyHandlers {
  readonly onBody: (body: Buffer) => void
  readonly onTimeout: () => void
  readonly onTooLarge: () => void
}

/** An upload in the deadline queue: a doubly linked list, oldest first. */
interface Upload {
  readonly deadline: number
  readonly onTimeout: () => void
  prev: Upload | undefined
  next: Upload | undefined
}

/**
 * Reads request bodies with a byte limit and a deadline. uWS hands body chunks that
 * are only valid during the callback, so each is copied out. The deadline defends
 * against slow bodies (a client trickling bytes to hold a connection and a buffer):
 * one coarse timer sweeps every upload rather than a timer per request.
 *
 * Every upload gets the same timeout, so starting order is deadline order: the uploads
 * wait in a linked list, the sweep takes expired ones from the head, and an upload
 * that ends unlinks itself in O(1). A Set would do the same, but its add and delete
 * on every request churn a hash table the collector must keep resizing.
 */
export class BodyReader {
  readonly #timeoutMs: number
  readonly #timer: NodeJS.Timeout
  #head: Upload | undefined
  #tail: Upload | undefined
  #count = 0

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs
    this.#timer = setInterval(() => this.#sweep(), Math.min(250, timeoutMs)).unref()
  }

  /** Uploads under way. */
  get pending(): number {
    return this.#count
  }

  #sweep(): void {
    // The monotonic clock, so a wall-clock step cannot reorder deadlines.
    const now = performance.now()
    while (this.#head !== undefined && this.#head.deadline <= now) {
      const upload = this.#head
      this.#unlink(upload)
      upload.onTimeout()
    }
  }

  #link(upload: Upload): void {
    upload.prev = this.#tail
    if (this.#tail === undefined) this.#head = upload
    else this.#tail.next = upload
    this.#tail = upload
    this.#count++
  }

  /** Takes the upload out of the queue; a second call does nothing. */
  #unlink(upload: Upload): void {
    const { prev, next } = upload
    if (prev === undefined && next === undefined && this.#head !== upload) return
    if (prev === undefined) this.#head = next
    else prev.next = next
    if (next === undefined) this.#tail = prev
    else next.prev = prev
    upload.prev = undefined
    upload.next = undefined
    this.#count--
  }

  /**
   * Collects up to `limit` bytes. `onBody` gets the whole body; `onTimeout` fires if it
   * has not arrived in time, `onTooLarge` if it exceeds the limit (possible only when
   * the declared length was not checked first). At most one of the three fires. The
   * returned function cancels the upload and drops what it holds: uWS calls nothing
   * more once a client is gone, so the caller cancels from its abort handler.
   */
  read(res: HttpResponse, limit: number, handlers: BodyHandlers): () => void {
    // uWS may keep the onData callback until the connection's next request, so the
    // callback reaches the upload only through `live`, which is emptied the moment the
    // upload ends: the body and the request's whole state are then free to go at once,
    // rather than outliving the request and being promoted to the old generation.
    let live: { chunks: Buffer[]; size: number; handlers: BodyHandlers } | undefined = { chunks: [], size: 0, handlers }
    const upload: Upload = {
      deadline: performance.now() + this.#timeoutMs,
      onTimeout: () => {
        const state = live
        live = undefined
        state?.handlers.onTimeout()
      },
      prev: undefined,
      next: undefined,
    }
    this.#link(upload)
    res.onData((chunk, isLast) => {
      const state = live
      if (state === undefined) return
      state.size += chunk.byteLength
      if (state.size > limit) {
        live = undefined
        this.#unlink(upload)
        state.handlers.onTooLarge()
        return
      }
      if (chunk.byteLength > 0) state.chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)))
      if (isLast) {
        live = undefined
        this.#unlink(upload)
        state.handlers.onBody(state.chunks.length === 1 ? (state.chunks[0] as Buffer) : Buffer.concat(state.chunks, state.size))
      }
    })
    return () => {
      live = undefined
      this.#unlink(upload)
    }
  }

  close(): void {
    clearInterval(this.#timer)
  }
}
