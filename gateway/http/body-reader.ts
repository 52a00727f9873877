import type { HttpResponse } from './uws.js'

export interface BodyHandlers {
  readonly onBody: (body: Buffer) => void
  readonly onTimeout: () => void
  readonly onTooLarge: () => void
  /**
   * The body did not come with the request head, and there is no room for one more slow
   * upload: `maxSlow` in all, or its owner's share of them, are already under way.
   */
  readonly onBusy: () => void
}

/**
 * The part of the slow places one owner may hold: an owner needs several connections'
 * worth of them only while its network is slow, and eight owners doing so at once
 * still fill the places, whereas one owner can no longer.
 */
const SLOW_SHARE_PER_OWNER = 1 / 8

/** An upload in the deadline queue: a doubly linked list, oldest first. */
interface Upload {
  readonly deadline: number
  /** Ends the upload from outside (deadline, or no room for one more slow upload). */
  readonly end: (why: 'timeout' | 'busy') => void
  prev: Upload | undefined
  next: Upload | undefined
  linked: boolean
  /** Still incomplete one event-loop turn after it started: counted in `slow`. */
  slow: boolean
  /** Whose share of the slow places it takes; undefined: one of the places kept for uploads nobody vouched for. */
  readonly owner: string | undefined
}

/**
 * Reads request bodies with a byte limit and a deadline. uWS hands body chunks that
 * are only valid during the callback, so each is copied out. The deadline defends
 * against slow bodies (a client trickling bytes to hold a connection and a buffer):
 * one coarse timer sweeps every upload rather than a timer per request.
 *
 * A body that came in the same packets as its head is delivered before the event loop
 * turns; one still incomplete by then is slow, and at most `maxSlow` slow uploads run
 * at once, and at most an eighth of them (SLOW_SHARE_PER_OWNER) for one owner (a
 * creator, a token holder). Uploads without an owner (whose head failed a check, so
 * nobody vouches for them) have an eighth of their own beside those, so they can never
 * take an owner's place (memory: `maxSlow` × 9/8 bodies at most). Past any of these, a
 * new slow upload is ended at once with `onBusy`. So clients that hold bodies back (a thousand connections each sending
 * a head and no body) never compete with the ordinary requests that send head and body
 * together, and one owner holding them back cannot take the places of the others.
 *
 * Every upload gets the same timeout, so starting order is deadline order: the uploads
 * wait in a linked list, the sweep takes expired ones from the head, and an upload
 * that ends unlinks itself in O(1). A Set would do the same, but its add and delete
 * on every request churn a hash table the collector must keep resizing.
 */
export class BodyReader {
  readonly #timeoutMs: number
  readonly #maxSlow: number
  readonly #maxSlowPerOwner: number
  /** Slow uploads per owner; touched only for slow uploads, never on the ordinary path. */
  readonly #slowByOwner = new Map<string, number>()
  /** Slow uploads without an owner: they have places of their own, an owner's share, apart from the others. */
  #slowUnowned = 0
  readonly #timer: NodeJS.Timeout
  #head: Upload | undefined
  #tail: Upload | undefined
  #count = 0
  #slow = 0
  /** Uploads started since the last check (an array, not a set: no hash table on the hot path); a check is due while it is not empty. */
  #fresh: Upload[] = []

  constructor(timeoutMs: number, maxSlow: number) {
    this.#timeoutMs = timeoutMs
    this.#maxSlow = maxSlow
    this.#maxSlowPerOwner = Math.max(1, Math.ceil(maxSlow * SLOW_SHARE_PER_OWNER))
    this.#timer = setInterval(() => this.#sweep(), Math.min(250, timeoutMs)).unref()
  }

  /** Uploads under way. */
  get pending(): number {
    return this.#count
  }

  /** Uploads under way whose body did not come with the head, and that have an owner. */
  get slow(): number {
    return this.#slow
  }

  /** Uploads under way whose body did not come with the head, without an owner. */
  get slowUnowned(): number {
    return this.#slowUnowned
  }

  /** One event-loop turn after uploads started: those still incomplete are slow. */
  readonly #checkFresh = (): void => {
    const fresh = this.#fresh
    this.#fresh = []
    for (let i = 0; i < fresh.length; i++) {
      const upload = fresh[i] as Upload
      if (!upload.linked) continue
      const owner = upload.owner
      if (owner === undefined) {
        if (this.#slowUnowned >= this.#maxSlowPerOwner) {
          this.#unlink(upload)
          upload.end('busy')
        } else {
          upload.slow = true
          this.#slowUnowned++
        }
        continue
      }
      const ownerSlow = this.#slowByOwner.get(owner) ?? 0
      if (this.#slow >= this.#maxSlow || ownerSlow >= this.#maxSlowPerOwner) {
        this.#unlink(upload)
        upload.end('busy')
      } else {
        upload.slow = true
        this.#slow++
        this.#slowByOwner.set(owner, ownerSlow + 1)
      }
    }
  }

  #sweep(): void {
    // The monotonic clock, so a wall-clock step cannot reorder deadlines.
    const now = performance.now()
    while (this.#head !== undefined && this.#head.deadline <= now) {
      const upload = this.#head
      this.#unlink(upload)
      upload.end('timeout')
    }
  }

  #link(upload: Upload): void {
    upload.linked = true
    upload.prev = this.#tail
    if (this.#tail === undefined) this.#head = upload
    else this.#tail.next = upload
    this.#tail = upload
    this.#count++
  }

  /** Takes the upload out of the queue; a second call does nothing. */
  #unlink(upload: Upload): void {
    if (!upload.linked) return
    upload.linked = false
    if (upload.slow && upload.owner === undefined) {
      upload.slow = false
      this.#slowUnowned--
    } else if (upload.slow) {
      upload.slow = false
      this.#slow--
      const owner = upload.owner as string
      const left = (this.#slowByOwner.get(owner) as number) - 1
      if (left === 0) this.#slowByOwner.delete(owner)
      else this.#slowByOwner.set(owner, left)
    }
    const { prev, next } = upload
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
   * the declared length was not checked first), `onBusy` if it is slow and there is no
   * room for another slow upload of `owner` (with no owner: of the unowned ones). At
   * most one of the four fires. The
   * returned function cancels the upload and drops what it holds: uWS calls nothing
   * more once a client is gone, so the caller cancels from its abort handler.
   */
  read(res: HttpResponse, limit: number, handlers: BodyHandlers, owner: string | undefined): () => void {
    // uWS may keep the onData callback until the connection's next request, so the
    // callback reaches the upload only through `live`, which is emptied the moment the
    // upload ends: the body and the request's whole state are then free to go at once,
    // rather than outliving the request and being promoted to the old generation.
    let live: { chunks: Buffer[]; size: number; handlers: BodyHandlers } | undefined = { chunks: [], size: 0, handlers }
    const upload: Upload = {
      deadline: performance.now() + this.#timeoutMs,
      end: (why) => {
        const state = live
        live = undefined
        if (why === 'timeout') state?.handlers.onTimeout()
        else state?.handlers.onBusy()
      },
      prev: undefined,
      next: undefined,
      linked: false,
      slow: false,
      owner,
    }
    this.#link(upload)
    if (this.#fresh.push(upload) === 1) setImmediate(this.#checkFresh)
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
