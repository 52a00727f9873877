import { ShardedExpiringIndex, type ExpiringIndex, type IndexPart, type IndexParts } from './expiring-index.js'
import { SharedRoom } from '../../shared-room.js'
import type { AcceptedSignal } from '../ports.js'
import { KeyedHash64 } from './string-hash.js'

/**
 * What the gateway remembers of each accepted signal, keyed both by
 * (source_id, signal_id) and by (source_id, Idempotency-Key), for the dedup window.
 * A retry with the same raw body gets the original `received_at` back; a different
 * body, or an Idempotency-Key already used by another signal, is a conflict
 * (409 idempotency_conflict): signal ids and Idempotency-Keys are one namespace per
 * source, compared by the SHA-256 of the raw body.
 *
 * Stored compactly (ShardedExpiringIndex): a 64-bit hash of the id, the source, the
 * first 128 bits of the body's SHA-256, the hash of the signal id, the arrival time
 * and a flag: about 60 bytes per accepted signal (up to twice that just after a shard
 * grew), outside the garbage-collected heap. An Idempotency-Key equal to the
 * signal_id (the recommended use) costs nothing more; another key, a second entry.
 * Entries match only within their own source, so no source can reach another's ids.
 *
 * Bounded by `maxEntries` in all and a share per source (SharedRoom): the pipeline
 * takes room before it appends and keeps it until the signal is remembered, so a full
 * index refuses a new signal instead of accepting one it could not deduplicate, also
 * when many arrive at once. What the log holds is always remembered (the rebuild
 * ignores the bound).
 */

export type DedupLookup =
  | { readonly kind: 'new' }
  /**
   * `unboundKey`: the request's Idempotency-Key, held for no signal yet. Answering the
   * replay uses it, so the caller binds it to this signal (`bindKey`): the same key with
   * another body is then a conflict, and this very request sent again a replay.
   */
  | { readonly kind: 'replay'; readonly record: AcceptedSignal; readonly unboundKey?: string }
  | { readonly kind: 'conflict' }
  /** Another request with the same id is between check and append: wait for it. */
  | { readonly kind: 'in_flight'; readonly settled: Promise<void> }

/**
 * The index as a snapshot writer takes it (`snapshot`): each table shard by shard, and
 * the names last, so that they cover every entry the parts hold, also one added while
 * the writer let the event loop run.
 */
export interface DedupExport {
  readonly bySignal: IndexParts
  readonly byIdempotencyKey: IndexParts
  names(): { readonly key: Uint8Array; readonly sources: readonly string[] }
}

/** What a snapshot keeps of the index, as read back (`restoreSnapshot`). */
export interface DedupSnapshot {
  /** The SipHash key the entries were hashed under. */
  readonly key: Uint8Array
  /** Source ids in the order of their small integers (1, 2, ...). */
  readonly sources: readonly string[]
  readonly bySignal: readonly IndexPart[]
  readonly byIdempotencyKey: readonly IndexPart[]
}

type Columns<T> = Array<() => T>

/** One table: id hash → (source, body hash prefix, signal id hash, arrival, test flag). */
class DedupTable {
  readonly index: ShardedExpiringIndex
  readonly source: Columns<Uint32Array>
  readonly body: Columns<Uint32Array>
  readonly signal: Columns<Uint32Array>
  readonly receivedAt: Columns<Float64Array>
  readonly test: Columns<Uint8Array>

  constructor(initialCapacity: number, onEvict: (source: number) => void) {
    this.index = new ShardedExpiringIndex({ initialCapacity, onEvict: (shard, slot) => onEvict((this.source[shard] as () => Uint32Array)()[slot] as number) })
    const each = <T extends Uint8Array | Uint32Array | Float64Array>(make: (n: number) => T, width = 1) => this.index.shards.map((s) => s.column(make, width))
    this.source = each((n) => new Uint32Array(n))
    this.body = each((n) => new Uint32Array(n), 4)
    this.signal = each((n) => new Uint32Array(n), 2)
    this.receivedAt = each((n) => new Float64Array(n))
    this.test = each((n) => new Uint8Array(n))
  }
}

interface Hit {
  readonly table: DedupTable
  readonly shard: number
  readonly slot: number
}

/** First 128 bits of a hex SHA-256 as four words. */
function bodyWords(hex: string, out: Uint32Array): void {
  for (let i = 0; i < 4; i++) out[i] = parseInt(hex.slice(i * 8, i * 8 + 8), 16) >>> 0
}

export class SignalDedup {
  readonly #windowMs: number
  #hasher = new KeyedHash64()
  readonly #bySignal: DedupTable
  readonly #byIdempotencyKey: DedupTable
  readonly #inFlight = new Map<string, Promise<void>>()
  /** Entries per source, both tables together. */
  readonly #room: SharedRoom
  /** source id → small integer, stored with each entry and used as the hash seed. */
  readonly #sources = new Map<string, number>()
  readonly #idHash = new Uint32Array(2)
  readonly #signalHash = new Uint32Array(2)
  readonly #words = new Uint32Array(4)
  /** The signal id hashed by the last lookup: `remember` of the same signal reuses it (a SHA-256 saved per accept). */
  #lastSignal = ''
  readonly #lastSignalHash = new Uint32Array(2)

  constructor(options: { windowMs: number; maxEntries: number; initialCapacity?: number }) {
    this.#windowMs = options.windowMs
    this.#room = new SharedRoom({ max: options.maxEntries })
    const evicted = (source: number) => this.#room.removed(source)
    this.#bySignal = new DedupTable(options.initialCapacity ?? 1 << 18, evicted)
    this.#byIdempotencyKey = new DedupTable(1 << 12, evicted)
  }

  get size(): number {
    return this.#bySignal.index.size + this.#byIdempotencyKey.index.size
  }

  #source(sourceId: string): number {
    let n = this.#sources.get(sourceId)
    if (n === undefined) {
      n = this.#sources.size + 1
      this.#sources.set(sourceId, n)
    }
    return n
  }

  /** Looks `id` up in `table` for this source; the hash lands in #idHash. */
  #find(table: DedupTable, source: number, id: string, now: number): Hit | undefined {
    this.#hasher.hash(id, source, this.#idHash)
    return this.#findHash(table, source, this.#idHash, now)
  }

  /** Looks up an id already hashed (#hasher with this source as the seed). */
  #findHash(table: DedupTable, source: number, hash: Uint32Array, now: number): Hit | undefined {
    const shard = table.index.shardOf(hash[0] as number)
    const sources = (table.source[shard] as () => Uint32Array)()
    const slot = (table.index.shards[shard] as ExpiringIndex).find(hash[0] as number, hash[1] as number, now, (s) => sources[s] === source)
    return slot < 0 ? undefined : { table, shard, slot }
  }

  /** True when the entry is this very signal with this very body. */
  #same(hit: Hit): boolean {
    const body = (hit.table.body[hit.shard] as () => Uint32Array)()
    const sig = (hit.table.signal[hit.shard] as () => Uint32Array)()
    const s = hit.slot
    return (
      sig[s * 2] === this.#signalHash[0] &&
      sig[s * 2 + 1] === this.#signalHash[1] &&
      body[s * 4] === this.#words[0] &&
      body[s * 4 + 1] === this.#words[1] &&
      body[s * 4 + 2] === this.#words[2] &&
      body[s * 4 + 3] === this.#words[3]
    )
  }

  lookup(sourceId: string, signalId: string, idempotencyKey: string | undefined, bodySha256: string, now: number): DedupLookup {
    this.#bySignal.index.expireSome(now, 16)
    this.#byIdempotencyKey.index.expireSome(now, 16)
    const separateKey = idempotencyKey !== undefined && idempotencyKey !== signalId ? idempotencyKey : undefined
    // Signal ids and Idempotency-Keys are one namespace per source: each id this request
    // claims is looked up both as a signal id ("\n") and as another signal's key ("\n\n").
    const pending =
      this.#inFlight.get(`${sourceId}\n${signalId}`) ??
      this.#inFlight.get(`${sourceId}\n\n${signalId}`) ??
      (separateKey === undefined ? undefined : (this.#inFlight.get(`${sourceId}\n${separateKey}`) ?? this.#inFlight.get(`${sourceId}\n\n${separateKey}`)))
    if (pending !== undefined) return { kind: 'in_flight', settled: pending }

    const source = this.#source(sourceId)
    bodyWords(bodySha256, this.#words)
    const bySignal = this.#find(this.#bySignal, source, signalId, now)
    this.#signalHash.set(this.#idHash)
    this.#lastSignal = `${source}\n${signalId}`
    this.#lastSignalHash.set(this.#idHash)
    if (bySignal !== undefined && !this.#same(bySignal)) return { kind: 'conflict' }
    // The table holds only keys that differ from their own signal's id, so a hit here is
    // always another signal: this signal_id was already used as its Idempotency-Key.
    const signalIdAsKey = this.#findHash(this.#byIdempotencyKey, source, this.#signalHash, now)
    if (signalIdAsKey !== undefined && !this.#same(signalIdAsKey)) return { kind: 'conflict' }
    let keyHeld = true
    if (separateKey !== undefined) {
      // The key may be held under its own entry, or be another signal's own id.
      const byKey = this.#find(this.#byIdempotencyKey, source, separateKey, now) ?? this.#find(this.#bySignal, source, separateKey, now)
      if (byKey !== undefined && !this.#same(byKey)) return { kind: 'conflict' }
      keyHeld = byKey !== undefined
    }
    if (bySignal === undefined) return { kind: 'new' }
    const { table, shard, slot } = bySignal
    const record: AcceptedSignal = {
      bodySha256,
      signalId,
      receivedAtMs: (table.receivedAt[shard] as () => Float64Array)()[slot] as number,
      test: (table.test[shard] as () => Uint8Array)()[slot] === 1,
    }
    return keyHeld ? { kind: 'replay', record } : { kind: 'replay', record, unboundKey: separateKey as string }
  }

  /**
   * Binds an Idempotency-Key a replay used to the signal it replayed, until that signal's
   * entry expires; the caller took room for one entry first (`takeRoom` without a key).
   * Call it in the turn of the lookup that returned `unboundKey`, so no other request
   * can claim the key in between.
   */
  bindKey(sourceId: string, idempotencyKey: string, record: AcceptedSignal, ifAbsent = false): void {
    const source = this.#source(sourceId)
    bodyWords(record.bodySha256, this.#words)
    this.#hasher.hash(record.signalId, source, this.#signalHash)
    this.#hasher.hash(idempotencyKey, source, this.#idHash)
    // `ifAbsent`: taken back after a restart, where a saved state may hold it already.
    if (ifAbsent && this.#findHash(this.#byIdempotencyKey, source, this.#idHash, record.receivedAtMs) !== undefined) return
    this.#store(this.#byIdempotencyKey, source, this.#idHash, record.receivedAtMs + this.#windowMs, record)
  }

  /**
   * Takes room for a new signal of this source until the returned function is called
   * (after `remember`, or when the signal is refused): `source_full` past its share of
   * the index, `store_full` past the whole (or its reserve for light sources).
   */
  takeRoom(sourceId: string, signalId: string, idempotencyKey: string | undefined, now: number): (() => void) | 'source_full' | 'store_full' {
    const source = this.#source(sourceId)
    const entries = idempotencyKey !== undefined && idempotencyKey !== signalId ? 2 : 1
    // Expiry runs a little per lookup; before refusing for a bound, drop everything expired.
    if (this.#room.room(source, entries) !== 'ok') this.sweep(now)
    const room = this.#room.room(source, entries)
    if (room !== 'ok') return room === 'holder_full' ? 'source_full' : room
    this.#room.added(source, entries)
    return () => this.#room.removed(source, entries)
  }

  /**
   * Marks the ids as being appended, so a concurrent duplicate waits instead of
   * racing to a second append. Returns the function that ends the reservation.
   */
  reserve(sourceId: string, signalId: string, idempotencyKey: string | undefined): () => void {
    let release!: () => void
    const settled = new Promise<void>((resolve) => (release = resolve))
    const keys = [`${sourceId}\n${signalId}`]
    if (idempotencyKey !== undefined && idempotencyKey !== signalId) keys.push(`${sourceId}\n\n${idempotencyKey}`)
    for (const key of keys) this.#inFlight.set(key, settled)
    return () => {
      for (const key of keys) this.#inFlight.delete(key)
      release()
    }
  }

  /**
   * Remembers an accepted signal. `ifAbsent` (the rebuild after a restart, which may read
   * again a signal a snapshot already holds) leaves an id already held as it is, so it is
   * neither stored nor counted twice.
   */
  remember(sourceId: string, idempotencyKey: string | undefined, record: AcceptedSignal, acceptedAt: number, ifAbsent = false): void {
    const source = this.#source(sourceId)
    const expiresAt = acceptedAt + this.#windowMs
    bodyWords(record.bodySha256, this.#words)
    if (this.#lastSignal === `${source}\n${record.signalId}`) this.#signalHash.set(this.#lastSignalHash)
    else this.#hasher.hash(record.signalId, source, this.#signalHash)
    if (!ifAbsent || this.#findHash(this.#bySignal, source, this.#signalHash, acceptedAt) === undefined) {
      this.#store(this.#bySignal, source, this.#signalHash, expiresAt, record)
    }
    if (idempotencyKey !== undefined && idempotencyKey !== record.signalId) {
      this.#hasher.hash(idempotencyKey, source, this.#idHash)
      if (!ifAbsent || this.#findHash(this.#byIdempotencyKey, source, this.#idHash, acceptedAt) === undefined) {
        this.#store(this.#byIdempotencyKey, source, this.#idHash, expiresAt, record)
      }
    }
  }

  #store(table: DedupTable, source: number, key: Uint32Array, expiresAt: number, record: AcceptedSignal): void {
    const shard = table.index.shardOf(key[0] as number)
    const slot = (table.index.shards[shard] as ExpiringIndex).insert(key[0] as number, key[1] as number, expiresAt)
    ;(table.source[shard] as () => Uint32Array)()[slot] = source
    ;(table.body[shard] as () => Uint32Array)().set(this.#words, slot * 4)
    const sig = (table.signal[shard] as () => Uint32Array)()
    sig[slot * 2] = this.#signalHash[0] as number
    sig[slot * 2 + 1] = this.#signalHash[1] as number
    ;(table.receivedAt[shard] as () => Float64Array)()[slot] = record.receivedAtMs
    ;(table.test[shard] as () => Uint8Array)()[slot] = record.test ? 1 : 0
    this.#room.added(source)
  }

  sweep(now: number): void {
    this.#bySignal.index.sweep(now)
    this.#byIdempotencyKey.index.sweep(now)
  }

  /** The entries live at `now`, copied out shard by shard with what it takes to find them again. */
  snapshot(now: number): DedupExport {
    return {
      bySignal: this.#bySignal.index.exportLive(now),
      byIdempotencyKey: this.#byIdempotencyKey.index.exportLive(now),
      names: () => ({ key: this.#hasher.key, sources: [...this.#sources.keys()] }),
    }
  }

  /**
   * Takes over a snapshot's entries (those still live at `now`), its hash key and its
   * source numbering, which the stored entries refer to: only into an empty index.
   * Like the rebuild from the log, it ignores the bounds: the log holds these signals.
   */
  async restoreSnapshot(snapshot: DedupSnapshot, now: number): Promise<void> {
    if (this.size > 0 || this.#sources.size > 0) throw new Error('a dedup snapshot is restored only into an empty index')
    this.#hasher = new KeyedHash64(snapshot.key)
    for (const sourceId of snapshot.sources) this.#source(sourceId)
    if (this.#sources.size !== snapshot.sources.length) throw new RangeError('a dedup snapshot names a source twice')
    for (const [table, parts] of [[this.#bySignal, snapshot.bySignal], [this.#byIdempotencyKey, snapshot.byIdempotencyKey]] as const) {
      await table.index.importParts(parts, now, (shard, slot) => {
        const source = (table.source[shard] as () => Uint32Array)()[slot] as number
        if (source < 1 || source > this.#sources.size) throw new RangeError(`a dedup entry names source ${source} of ${this.#sources.size}`)
        this.#room.added(source)
      })
    }
  }
}
