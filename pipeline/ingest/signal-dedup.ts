import { ExpiringIndex } from './expiring-index.js'
import { hash64 } from './string-hash.js'

/**
 * What the gateway remembers of each accepted signal, keyed both by
 * (source_id, signal_id) and by (source_id, Idempotency-Key), for the dedup window.
 * A retry with the same raw body gets the original `received_at` back; a different
 * body is a conflict (spec 3.2, DESIGN.md section 4).
 *
 * Stored compactly (ExpiringIndex): a 64-bit hash of the id, the first 128 bits of the
 * body's SHA-256, the arrival time and a flag: about 60 bytes per accepted signal
 * outside the garbage-collected heap, so 1,000 signals/s held for 30 minutes is about
 * 110 MB. An Idempotency-Key equal to the signal_id (the recommended use) costs nothing
 * more; another key costs a second entry.
 */
export interface DedupRecord {
  readonly bodySha256: string
  readonly signalId: string
  readonly receivedAtMs: number
  readonly test: boolean
}

export type DedupLookup =
  | { readonly kind: 'new' }
  | { readonly kind: 'replay'; readonly record: DedupRecord }
  | { readonly kind: 'conflict' }
  /** Another request with the same id is between check and append: wait for it. */
  | { readonly kind: 'in_flight'; readonly settled: Promise<void> }

/** One table: id hash → (body hash prefix, signal id hash, arrival, test flag). */
class DedupTable {
  readonly index: ExpiringIndex
  readonly body: () => Uint32Array
  readonly signal: () => Uint32Array
  readonly receivedAt: () => Float64Array
  readonly test: () => Uint8Array

  constructor(initialCapacity: number) {
    this.index = new ExpiringIndex({ initialCapacity })
    this.body = this.index.column((n) => new Uint32Array(n), 4)
    this.signal = this.index.column((n) => new Uint32Array(n), 2)
    this.receivedAt = this.index.column((n) => new Float64Array(n))
    this.test = this.index.column((n) => new Uint8Array(n))
  }
}

/** First 128 bits of a hex SHA-256 as four words. */
function bodyWords(hex: string, out: Uint32Array, at: number): void {
  for (let i = 0; i < 4; i++) out[at + i] = parseInt(hex.slice(i * 8, i * 8 + 8), 16) >>> 0
}

export class SignalDedup {
  readonly #windowMs: number
  readonly #bySignal: DedupTable
  readonly #byIdempotencyKey: DedupTable
  readonly #inFlight = new Map<string, Promise<void>>()
  /** source id → small integer, the hash seed, so ids of different sources never meet. */
  readonly #sourceSeeds = new Map<string, number>()
  readonly #h = new Uint32Array(2)
  readonly #s = new Uint32Array(2)
  readonly #words = new Uint32Array(4)

  constructor(options: { windowMs: number; initialCapacity?: number }) {
    this.#windowMs = options.windowMs
    this.#bySignal = new DedupTable(options.initialCapacity ?? 1 << 18)
    this.#byIdempotencyKey = new DedupTable(1 << 10)
  }

  get size(): number {
    return this.#bySignal.index.size + this.#byIdempotencyKey.index.size
  }

  #seed(sourceId: string): number {
    let seed = this.#sourceSeeds.get(sourceId)
    if (seed === undefined) {
      seed = this.#sourceSeeds.size + 1
      this.#sourceSeeds.set(sourceId, seed)
    }
    return seed
  }

  lookup(sourceId: string, signalId: string, idempotencyKey: string | undefined, bodySha256: string, now: number): DedupLookup {
    this.#bySignal.index.expire(now, 16)
    this.#byIdempotencyKey.index.expire(now, 16)
    const pending = this.#inFlight.get(`${sourceId}\n${signalId}`) ?? (idempotencyKey === undefined ? undefined : this.#inFlight.get(`${sourceId}\n\n${idempotencyKey}`))
    if (pending !== undefined) return { kind: 'in_flight', settled: pending }
    const seed = this.#seed(sourceId)
    hash64(signalId, seed, this.#s)
    bodyWords(bodySha256, this.#words, 0)
    let found = this.#match(this.#bySignal, this.#s[0] as number, this.#s[1] as number, now)
    if (found === undefined && idempotencyKey !== undefined && idempotencyKey !== signalId) {
      hash64(idempotencyKey, seed, this.#h)
      // A key equal to some signal's own id was stored only under that signal.
      found =
        this.#match(this.#byIdempotencyKey, this.#h[0] as number, this.#h[1] as number, now) ??
        this.#match(this.#bySignal, this.#h[0] as number, this.#h[1] as number, now)
    }
    if (found === undefined) return { kind: 'new' }
    const { table, slot } = found
    const body = table.body()
    const sig = table.signal()
    const same =
      sig[slot * 2] === this.#s[0] &&
      sig[slot * 2 + 1] === this.#s[1] &&
      body[slot * 4] === this.#words[0] &&
      body[slot * 4 + 1] === this.#words[1] &&
      body[slot * 4 + 2] === this.#words[2] &&
      body[slot * 4 + 3] === this.#words[3]
    if (!same) return { kind: 'conflict' }
    return { kind: 'replay', record: { bodySha256, signalId, receivedAtMs: table.receivedAt()[slot] as number, test: table.test()[slot] === 1 } }
  }

  #match(table: DedupTable, hi: number, lo: number, now: number): { table: DedupTable; slot: number } | undefined {
    const slot = table.index.find(hi, lo, now)
    return slot < 0 ? undefined : { table, slot }
  }

  /**
   * Marks the ids as being appended, so a concurrent duplicate waits instead of
   * racing to a second append. Returns the function that ends the reservation.
   */
  reserve(sourceId: string, signalId: string, idempotencyKey: string | undefined): () => void {
    let release!: () => void
    const settled = new Promise<void>((resolve) => (release = resolve))
    const keys = [`${sourceId}\n${signalId}`]
    if (idempotencyKey !== undefined) keys.push(`${sourceId}\n\n${idempotencyKey}`)
    for (const key of keys) this.#inFlight.set(key, settled)
    return () => {
      for (const key of keys) this.#inFlight.delete(key)
      release()
    }
  }

  remember(sourceId: string, idempotencyKey: string | undefined, record: DedupRecord, acceptedAt: number): void {
    const seed = this.#seed(sourceId)
    const expiresAt = acceptedAt + this.#windowMs
    hash64(record.signalId, seed, this.#s)
    bodyWords(record.bodySha256, this.#words, 0)
    this.#store(this.#bySignal, this.#s[0] as number, this.#s[1] as number, expiresAt, record)
    if (idempotencyKey !== undefined && idempotencyKey !== record.signalId) {
      hash64(idempotencyKey, seed, this.#h)
      this.#store(this.#byIdempotencyKey, this.#h[0] as number, this.#h[1] as number, expiresAt, record)
    }
  }

  #store(table: DedupTable, hi: number, lo: number, expiresAt: number, record: DedupRecord): void {
    const slot = table.index.insert(hi, lo, expiresAt)
    table.body().set(this.#words, slot * 4)
    const sig = table.signal()
    sig[slot * 2] = this.#s[0] as number
    sig[slot * 2 + 1] = this.#s[1] as number
    table.receivedAt()[slot] = record.receivedAtMs
    table.test()[slot] = record.test ? 1 : 0
  }

  sweep(now: number): void {
    this.#bySignal.index.expire(now)
    this.#byIdempotencyKey.index.expire(now)
  }
}
