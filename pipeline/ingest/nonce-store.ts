import { ExpiringIndex } from './expiring-index.js'
import { hash64 } from './string-hash.js'

/**
 * Nonces seen per (source_id, key_id), kept for the nonce window (spec 5.2: 10
 * minutes). The edge admits a request only while its timestamp is within 300 s of the
 * clock, and the pipeline checks that again just before claiming, so a claim happens
 * no earlier than timestamp − 300 s and a replay is claimed no later than timestamp +
 * 300 s: a window of 600 s, counted inclusively, always covers the replay.
 *
 * Memory: about 40 bytes per live nonce (64-bit hash, expiry, scope, table), outside
 * the garbage-collected heap. Two bounds keep it finite: a cap per (source, key),
 * derived from the source's max_rate by the caller, so one key (even a leaked one)
 * cannot crowd out the others; and a global cap.
 */
export type NonceClaim = 'claimed' | 'replayed' | 'scope_full' | 'store_full'

export class NonceStore {
  readonly #windowMs: number
  readonly #maxEntries: number
  readonly #index: ExpiringIndex
  readonly #scopeOf: () => Uint32Array
  /** (source, key) → small integer, so an entry stores 4 bytes of scope, not two ids. */
  readonly #scopeIds = new Map<string, number>()
  readonly #perScope: number[] = []
  readonly #hash = new Uint32Array(2)

  constructor(options: { windowMs: number; maxEntries: number; initialCapacity?: number }) {
    this.#windowMs = options.windowMs
    this.#maxEntries = options.maxEntries
    this.#index = new ExpiringIndex({
      initialCapacity: options.initialCapacity ?? 1 << 18,
      onEvict: (slot) => {
        const scope = this.#scopeOf()[slot] as number
        this.#perScope[scope] = (this.#perScope[scope] as number) - 1
      },
    })
    this.#scopeOf = this.#index.column((n) => new Uint32Array(n))
  }

  get size(): number {
    return this.#index.size
  }

  #scope(sourceId: string, keyId: string): number {
    const name = `${sourceId}\n${keyId}`
    let id = this.#scopeIds.get(name)
    if (id === undefined) {
      id = this.#scopeIds.size
      this.#scopeIds.set(name, id)
      this.#perScope.push(0)
    }
    return id
  }

  /**
   * Claims `nonce` for the scope. `replayed` means it was claimed within the window;
   * `scope_full` and `store_full` mean the claim would pass a memory bound.
   */
  claim(sourceId: string, keyId: string, nonce: string, now: number, scopeCap: number): NonceClaim {
    this.#index.expire(now, 16)
    const scope = this.#scope(sourceId, keyId)
    hash64(nonce, scope, this.#hash)
    const hi = this.#hash[0] as number
    const lo = this.#hash[1] as number
    if (this.#index.find(hi, lo, now) >= 0) return 'replayed'
    if (this.#index.size >= this.#maxEntries) return 'store_full'
    if ((this.#perScope[scope] as number) >= scopeCap) return 'scope_full'
    this.#add(scope, hi, lo, now + this.#windowMs)
    return 'claimed'
  }

  /** Re-inserts a nonce claimed at `claimedAt`, when rebuilding state after a restart. */
  restore(sourceId: string, keyId: string, nonce: string, claimedAt: number, now: number): void {
    const expiresAt = claimedAt + this.#windowMs
    if (expiresAt < now) return
    const scope = this.#scope(sourceId, keyId)
    hash64(nonce, scope, this.#hash)
    const hi = this.#hash[0] as number
    const lo = this.#hash[1] as number
    if (this.#index.find(hi, lo, now) < 0) this.#add(scope, hi, lo, expiresAt)
  }

  #add(scope: number, hi: number, lo: number, expiresAt: number): void {
    const slot = this.#index.insert(hi, lo, expiresAt)
    this.#scopeOf()[slot] = scope
    this.#perScope[scope] = (this.#perScope[scope] as number) + 1
  }

  /** Drops every expired entry; called from a slow timer. */
  sweep(now: number): void {
    this.#index.expire(now)
  }
}
