import type { HttpResponse } from './uws.js'

interface Upload {
  readonly deadline: number
  readonly onTimeout: () => void
}

/**
 * Reads request bodies with a byte limit and a deadline. uWS hands body chunks that
 * are only valid during the callback, so each is copied out. The deadline defends
 * against slow bodies (a client trickling bytes to hold a connection and a buffer):
 * one coarse timer sweeps every upload rather than a timer per request.
 */
export class BodyReader {
  readonly #timeoutMs: number
  readonly #uploads = new Set<Upload>()
  readonly #timer: NodeJS.Timeout

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs
    this.#timer = setInterval(() => this.#sweep(), Math.min(250, timeoutMs)).unref()
  }

  #sweep(): void {
    const now = Date.now()
    for (const upload of this.#uploads) {
      if (upload.deadline <= now) {
        this.#uploads.delete(upload)
        upload.onTimeout()
      }
    }
  }

  /**
   * Collects up to `limit` bytes. `onBody` gets the whole body; `onTimeout` fires if it
   * has not arrived in time, `onTooLarge` if it exceeds the limit (possible only when
   * the declared length was not checked first). At most one of the three fires. The
   * returned function cancels the upload and drops what it holds: uWS calls nothing
   * more once a client is gone, so the caller cancels from its abort handler.
   */
  read(res: HttpResponse, limit: number, handlers: { onBody: (body: Buffer) => void; onTimeout: () => void; onTooLarge: () => void }): () => void {
    let chunks: Buffer[] = []
    let size = 0
    let finished = false
    const upload: Upload = {
      deadline: Date.now() + this.#timeoutMs,
      onTimeout: () => {
        if (finished) return
        finished = true
        handlers.onTimeout()
      },
    }
    this.#uploads.add(upload)
    res.onData((chunk, isLast) => {
      if (finished) return
      size += chunk.byteLength
      if (size > limit) {
        finished = true
        this.#uploads.delete(upload)
        handlers.onTooLarge()
        return
      }
      if (chunk.byteLength > 0) chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)))
      if (isLast) {
        finished = true
        this.#uploads.delete(upload)
        handlers.onBody(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
      }
    })
    return () => {
      finished = true
      chunks = []
      this.#uploads.delete(upload)
    }
  }

  close(): void {
    clearInterval(this.#timer)
  }
}
