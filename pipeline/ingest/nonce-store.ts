/**
 * Nonces seen per (source_id, key_id), kept for the nonce window (spec 5.2: 10
 * minutes). A request timestamp passes the skew check for at most 300 s either side,
 * so a nonce older than the window can no longer come with an acceptable timestamp
 * and is safe to forget.
 *
 * One Map in insertion order doubles as the expiry queue: claims arrive in time order,
 * so expired entries sit at the head and are dropped from there. Memory: about 150
 * bytes per live nonce (a 40-byte nonce, the scope and a number).
 */
export class NonceStore {
  readonly #windowMs: number
  readonly #maxEntries: number
  readonly #seen = new Map<string, number>()

  constructor(options: { windowMs: number; maxEntries: number }) {
    this.#windowMs = options.windowMs
    this.#maxEntries = options.maxEntries
  }

  get size(): number {
    return this.#seen.size
  }

  /** True when `maxEntries` live nonces are held and none has expired. */
  isFull(now: number): boolean {
    this.#expire(now, 64)
    return this.#seen.size >= this.#maxEntries
  }

  /**
   * Claims `nonce` for the scope. Returns false if it was already claimed within the
   * window: the request is a replay.
   */
  claim(sourceId: string, keyId: string, nonce: string, now: number): boolean {
    this.#expire(now, 8)
    const id = `${sourceId}\n${keyId}\n${nonce}`
    const expiresAt = this.#seen.get(id)
    if (expiresAt !== undefined && expiresAt > now) return false
    if (expiresAt !== undefined) this.#seen.delete(id)
    this.#seen.set(id, now + this.#windowMs)
    return true
  }

  /** Re-inserts a nonce claimed at `claimedAt`, when rebuilding state after a restart. */
  restore(sourceId: string, keyId: string, nonce: string, claimedAt: number, now: number): void {
    const expiresAt = claimedAt + this.#windowMs
    if (expiresAt > now) this.#seen.set(`${sourceId}\n${keyId}\n${nonce}`, expiresAt)
  }

  /** Drops up to `budget` expired entries from the head; bounded so a claim stays O(1). */
  #expire(now: number, budget: number): void {
    for (const [id, expiresAt] of this.#seen) {
      if (expiresAt > now || budget-- === 0) return
      this.#seen.delete(id)
    }
  }

  /** Drops every expired entry; called from a slow timer. */
  sweep(now: number): void {
    this.#expire(now, Number.POSITIVE_INFINITY)
  }
}
