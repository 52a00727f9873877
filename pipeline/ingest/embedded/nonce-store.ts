import { ShardedExpiringIndex, type IndexPart, type IndexParts } from './expiring-index.js'
import { SharedRoom } from '../../shared-room.js'
import { KeyedHash64 } from './string-hash.js'

/**
 * Nonces seen per (source_id, key_id), kept for the nonce window (10 minutes: a
 * nonce reused with the same key within it is 401 replayed_nonce). The edge admits a request only while its timestamp is within 300 s of the
 * clock, and the pipeline checks that again just before claiming, so a claim happens
 * no earlier than timestamp − 300 s and a replay is claimed no later than timestamp +
 * 300 s: a window of 600 s, counted inclusively, always covers the replay.
 *
 * Memory: about 30 bytes per live nonce (64-bit hash, expiry, scope, table), up to
 * twice that while a shard has just grown, outside the garbage-collected heap. Two
 * bounds keep it finite: `maxEntries` in all, and a cap per source over all its keys,
 * derived from the source's max_rate by the caller and never more than a quarter of
 * the whole (SharedRoom), so one source (even with a leaked key, or with
 * every key it may register) cannot crowd out the others; and the store's last eighth
 * goes to sources below the average holding (SharedRoom).
 */
export type NonceClaim = 'claimed' | 'replayed' | 'source_full' | 'store_full'

/** The store as a snapshot writer takes it (`snapshot`): shard by shard, the names last (see DedupExport). */
export interface NonceExport {
  readonly index: IndexParts
  names(): { readonly key: Uint8Array; readonly scopes: ReadonlyArray<readonly [string, string]> }
}

/** What a snapshot keeps of the store, as read back (`restoreSnapshot`). */
export interface NonceSnapshot {
  /** The SipHash key the nonces were hashed under. */
  readonly key: Uint8Array
  /** (source_id, key_id) in the order of their scope numbers (0, 1, ...). */
  readonly scopes: ReadonlyArray<readonly [string, string]>
  readonly index: readonly IndexPart[]
}

export class NonceStore {
  readonly #windowMs: number
  #hasher = new KeyedHash64()
  readonly #room: SharedRoom
  readonly #index: ShardedExpiringIndex
  readonly #scopeOf: Array<() => Uint32Array>
  /** (source, key) → small integer, so an entry stores 4 bytes of scope, not two ids. */
  readonly #scopeIds = new Map<string, number>()
  /** Scope → its source's small integer. */
  readonly #sourceOfScope: number[] = []
  /** Scope → its live nonces. A scope left with none is freed and its number given out again. */
  readonly #liveOfScope: number[] = []
  /** Scope → its name, while it is in use. */
  readonly #nameOfScope: Array<string | undefined> = []
  /** Numbers of freed scopes: a key is used once and revoked, again and again, and scopes must not pile up. */
  readonly #freeScopes: number[] = []
  readonly #sourceIds = new Map<string, number>()
  readonly #hash = new Uint32Array(2)

  constructor(options: { windowMs: number; maxEntries: number; initialCapacity?: number }) {
    this.#windowMs = options.windowMs
    // Live nonces per source, all its keys together.
    this.#room = new SharedRoom({ max: options.maxEntries })
    this.#index = new ShardedExpiringIndex({
      initialCapacity: options.initialCapacity ?? 1 << 18,
      onEvict: (shard, slot) => this.#removed((this.#scopeOf[shard] as () => Uint32Array)()[slot] as number),
    })
    this.#scopeOf = this.#index.shards.map((s) => s.column((n) => new Uint32Array(n)))
  }

  get size(): number {
    return this.#index.size
  }

  #scope(sourceId: string, keyId: string): number {
    const name = `${sourceId}\n${keyId}`
    let id = this.#scopeIds.get(name)
    if (id === undefined) {
      // No nonce of a freed scope is left, so its number (and hash seed) can serve another.
      id = this.#freeScopes.pop() ?? this.#nameOfScope.length
      this.#scopeIds.set(name, id)
      let source = this.#sourceIds.get(sourceId)
      if (source === undefined) {
        source = this.#sourceIds.size
        this.#sourceIds.set(sourceId, source)
      }
      this.#sourceOfScope[id] = source
      this.#nameOfScope[id] = name
      this.#liveOfScope[id] = 0
    }
    return id
  }

  /** Scopes in use (with a live nonce, or just named by a claim). */
  get scopes(): number {
    return this.#scopeIds.size
  }

  #removed(scope: number): void {
    this.#room.removed(this.#sourceOfScope[scope] as number)
    const live = (this.#liveOfScope[scope] as number) - 1
    this.#liveOfScope[scope] = live
    if (live === 0) this.#free(scope)
  }

  #free(scope: number): void {
    this.#scopeIds.delete(this.#nameOfScope[scope] as string)
    this.#nameOfScope[scope] = undefined
    this.#freeScopes.push(scope)
  }

  /** The slot of the live nonce in `shard`, or -1; the scope is compared too, so scopes never meet. */
  #find(shard: number, scope: number, now: number): number {
    const scopes = (this.#scopeOf[shard] as () => Uint32Array)()
    return (this.#index.shards[shard] as ShardedExpiringIndex['shards'][number]).find(this.#hash[0] as number, this.#hash[1] as number, now, (slot) => scopes[slot] === scope)
  }

  /**
   * Claims `nonce` for the scope. `replayed` means it was claimed within the window;
   * `source_full` (past `sourceCap` or the per-source share) and `store_full` (the
   * store, or its reserve for lighter sources) mean the claim would pass a memory bound.
   */
  claim(sourceId: string, keyId: string, nonce: string, now: number, sourceCap: number): NonceClaim {
    this.#index.expireSome(now, 16)
    const scope = this.#scope(sourceId, keyId)
    this.#hasher.hash(nonce, scope, this.#hash)
    const shard = this.#index.shardOf(this.#hash[0] as number)
    if (this.#find(shard, scope, now) >= 0) return 'replayed'
    const source = this.#sourceOfScope[scope] as number
    // Expiry runs a little per claim; before refusing for a bound, drop everything expired.
    if (this.#room.room(source, 1, sourceCap) !== 'ok') this.#index.sweep(now)
    const room = this.#room.room(source, 1, sourceCap)
    if (room !== 'ok') {
      if (this.#liveOfScope[scope] === 0) this.#free(scope)
      return room === 'holder_full' ? 'source_full' : 'store_full'
    }
    this.#add(shard, scope, now + this.#windowMs)
    return 'claimed'
  }

  /** Re-inserts a nonce claimed at `claimedAt`, when rebuilding state after a restart. */
  restore(sourceId: string, keyId: string, nonce: string, claimedAt: number, now: number): void {
    const expiresAt = claimedAt + this.#windowMs
    if (expiresAt < now) return
    const scope = this.#scope(sourceId, keyId)
    this.#hasher.hash(nonce, scope, this.#hash)
    const shard = this.#index.shardOf(this.#hash[0] as number)
    if (this.#find(shard, scope, now) < 0) this.#add(shard, scope, expiresAt)
    else if (this.#liveOfScope[scope] === 0) this.#free(scope)
  }

  #add(shard: number, scope: number, expiresAt: number): void {
    const slot = (this.#index.shards[shard] as ShardedExpiringIndex['shards'][number]).insert(this.#hash[0] as number, this.#hash[1] as number, expiresAt)
    ;(this.#scopeOf[shard] as () => Uint32Array)()[slot] = scope
    this.#room.added(this.#sourceOfScope[scope] as number)
    this.#liveOfScope[scope] = (this.#liveOfScope[scope] as number) + 1
  }

  /** Drops every expired entry; called from a slow timer. */
  sweep(now: number): void {
    this.#index.sweep(now)
  }

  /** The nonces live at `now`, copied out shard by shard with what it takes to find them again. */
  snapshot(now: number): NonceExport {
    // By scope number; a freed number is written as a name no key has (an empty source id,
    // unique), which the restore frees again. A source id (generated) holds no newline.
    const scopes = () =>
      this.#nameOfScope.map((name, id): [string, string] => {
        if (name === undefined) return ['', `free ${id}`]
        const cut = name.indexOf('\n')
        return [name.slice(0, cut), name.slice(cut + 1)]
      })
    return { index: this.#index.exportLive(now), names: () => ({ key: this.#hasher.key, scopes: scopes() }) }
  }

  /**
   * Takes over a snapshot's nonces (those still live at `now`), its hash key and its
   * scope numbering, which the stored nonces refer to: only into an empty store. Like a
   * restore from the log, it ignores the bounds: these nonces were claimed.
   */
  async restoreSnapshot(snapshot: NonceSnapshot, now: number): Promise<void> {
    if (this.size > 0 || this.#scopeIds.size > 0) throw new Error('a nonce snapshot is restored only into an empty store')
    this.#hasher = new KeyedHash64(snapshot.key)
    for (const [sourceId, keyId] of snapshot.scopes) this.#scope(sourceId, keyId)
    if (this.#scopeIds.size !== snapshot.scopes.length) throw new RangeError('a nonce snapshot names a scope twice')
    await this.#index.importParts(snapshot.index, now, (shard, slot) => {
      const scope = (this.#scopeOf[shard] as () => Uint32Array)()[slot] as number
      if (scope >= this.#nameOfScope.length) throw new RangeError(`a nonce names scope ${scope} of ${this.#nameOfScope.length}`)
      this.#room.added(this.#sourceOfScope[scope] as number)
      this.#liveOfScope[scope] = (this.#liveOfScope[scope] as number) + 1
    })
    // Scopes whose nonces all expired since the snapshot, and the numbers it kept free.
    for (let scope = this.#nameOfScope.length - 1; scope >= 0; scope--) if (this.#liveOfScope[scope] === 0) this.#free(scope)
  }
}
