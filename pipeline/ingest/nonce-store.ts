/**
 * Nonces seen per (source_id, key_id), kept for the nonce window (spec 5.2: 10
 * minutes). The edge admits a request only while its timestamp is within 300 s of the
 * clock, and the pipeline checks that again just before claiming, so a claim happens
 * no earlier than timestamp − 300 s and a replay is claimed no later than timestamp +
 * 300 s: a window of 600 s, counted inclusively, always covers the replay.
 *
 * One Map in insertion order doubles as the expiry queue: claims arrive in time order,
 * so expired entries sit at the head and are dropped from there. Memory: about 150
 * bytes per live nonce. Two bounds keep it finite: a cap per (source, key), derived
 * from the source's max_rate by the caller, so one key (even a leaked one) cannot
 * crowd out the others; and a global cap.
 */
export type NonceClaim = 'claimed' | 'replayed' | 'scope_full' | 'store_full'

export class NonceStore {
  readonly #windowMs: number
  readonly #maxEntries: number
  readonly #seen = new Map<string, number>()
  readonly #perScope = new Map<string, number>()

  constructor(options: { windowMs: number; maxEntries: number }) {
    this.#windowMs = options.windowMs
    this.#maxEntries = options.maxEntries
  }

  get size(): number {
    return this.#seen.size
  }

  /**
   * Claims `nonce` for the scope. `replayed` means it was claimed within the window;
   * `scope_full` and `store_full` mean the claim would pass a memory bound.
   */
  claim(sourceId: string, keyId: string, nonce: string, now: number, scopeCap: number): NonceClaim {
    this.#expire(now, 8)
    const scope = `${sourceId}\n${keyId}`
    const id = `${scope}\n${nonce}`
    const expiresAt = this.#seen.get(id)
    if (expiresAt !== undefined && expiresAt >= now) return 'replayed'
    if (expiresAt !== undefined) this.#forget(id)
    if (this.#seen.size >= this.#maxEntries) return 'store_full'
    const inScope = this.#perScope.get(scope) ?? 0
    if (inScope >= scopeCap) return 'scope_full'
    this.#seen.set(id, now + this.#windowMs)
    this.#perScope.set(scope, inScope + 1)
    return 'claimed'
  }

  /** Re-inserts a nonce claimed at `claimedAt`, when rebuilding state after a restart. */
  restore(sourceId: string, keyId: string, nonce: string, claimedAt: number, now: number): void {
    const expiresAt = claimedAt + this.#windowMs
    const scope = `${sourceId}\n${keyId}`
    const id = `${scope}\n${nonce}`
    if (expiresAt < now || this.#seen.has(id)) return
    this.#seen.set(id, expiresAt)
    this.#perScope.set(scope, (this.#perScope.get(scope) ?? 0) + 1)
  }

  #forget(id: string): void {
    this.#seen.delete(id)
    const scope = id.slice(0, id.lastIndexOf('\n'))
    const left = (this.#perScope.get(scope) ?? 1) - 1
    if (left > 0) this.#perScope.set(scope, left)
    else this.#perScope.delete(scope)
  }

  /** Drops up to `budget` expired entries from the head; bounded so a claim stays O(1). */
  #expire(now: number, budget: number): void {
    for (const [id, expiresAt] of this.#seen) {
      if (expiresAt >= now || budget-- === 0) return
      this.#forget(id)
    }
  }

  /** Drops every expired entry; called from a slow timer. */
  sweep(now: number): void {
    this.#expire(now, Number.POSITIVE_INFINITY)
  }
}
