import { setImmediate as yieldToLoop } from 'node:timers/promises'

/**
 * A set of 64-bit keys that each expire, on typed arrays: an open-addressing hash
 * table (linear probing) over a ring of entries kept in insertion order. The ingest
 * state (nonces, dedup) holds one entry per accepted signal for tens of minutes, and as
 * string-keyed Maps that cost about 2 KB per signal with garbage and stalled the event
 * loop for tens of milliseconds whenever a large Map rehashed. Here an entry costs its
 * columns plus 8 bytes of table, lives outside the garbage-collected heap, and growth
 * is one doubling copy of flat arrays.
 *
 * Entries are expected in roughly increasing expiry order (they are inserted with
 * now + window), so expired ones sit at the head of the ring and leave from there. An
 * entry that expires out of order simply stays until the head reaches it; lookups
 * ignore it meanwhile.
 *
 * Callers attach their own columns (e.g. a body hash) with `column()`; a column's
 * values live at the entry's slot and move with it when the ring grows.
 */
export type Column = Uint8Array | Uint32Array | Float64Array

/** Live entries copied out of an index, in ring order: what a snapshot keeps of it. */
export interface IndexPart {
  readonly count: number
  readonly keyHi: Uint32Array
  readonly keyLo: Uint32Array
  readonly expiresAt: Float64Array
  /** The caller's columns, in the order they were added, `width` values per entry. */
  readonly columns: readonly Column[]
}

/**
 * Parts copied out one at a time, when `at(i)` is called: a snapshot writer takes an
 * index shard by shard, letting the event loop run between, and never holds a copy of
 * the whole. An array of parts is one too.
 */
export interface IndexParts {
  readonly length: number
  at(i: number): IndexPart | undefined
}

export interface ExpiringIndexOptions {
  readonly initialCapacity: number
  /**
   * Fill level, from 0.5 (exclusive) to 1, at which the ring doubles; 1 (the default)
   * grows only when it is full. ShardedExpiringIndex gives each shard its own.
   */
  readonly growAtFill?: number
  readonly onEvict?: (slot: number) => void
}

/** The probe budget of `importPart`: 16 per entry, many times what keys under a secret hash take, plus a floor for small parts. */
const IMPORT_PROBES_PER_ENTRY = 16
const IMPORT_PROBES_FLOOR = 65_536

export class ExpiringIndex {
  #capacity: number
  /** Entries at which the ring doubles: `growAtFill` of the capacity. */
  #growAt: number
  readonly #growAtFill: number
  #head = 0
  #count = 0
  #keyHi: Uint32Array
  #keyLo: Uint32Array
  #expiresAt: Float64Array
  /** Slot + 1 per table cell; 0 is empty. Twice the ring's capacity keeps probes short. */
  #table: Uint32Array
  readonly #columns: Array<{ array: Column; width: number; make: (n: number) => Column }> = []
  readonly #onEvict: ((slot: number) => void) | undefined
  /** Occupied cells stepped over while placing entries, ever: what `importPart` bounds. */
  #probes = 0

  constructor(options: ExpiringIndexOptions) {
    const growAtFill = options.growAtFill ?? 1
    if (!(growAtFill > 0.5 && growAtFill <= 1)) throw new RangeError(`growAtFill must be in (0.5, 1], got ${growAtFill}`)
    this.#growAtFill = growAtFill
    this.#capacity = 1 << Math.ceil(Math.log2(Math.max(16, options.initialCapacity)))
    this.#growAt = this.#growThreshold()
    this.#keyHi = new Uint32Array(this.#capacity)
    this.#keyLo = new Uint32Array(this.#capacity)
    this.#expiresAt = new Float64Array(this.#capacity)
    this.#table = new Uint32Array(this.#capacity * 2)
    this.#onEvict = options.onEvict
  }

  /** Live and not yet evicted entries. */
  get size(): number {
    return this.#count
  }

  /** Slots in the ring; it doubles once `growAtFill` of them are taken. */
  get capacity(): number {
    return this.#capacity
  }

  /** At most the capacity (growAtFill ≤ 1), and past half of it. */
  #growThreshold(): number {
    return Math.ceil(this.#capacity * this.#growAtFill)
  }

  /** Adds a column of `width` values per entry; read it through the returned getter, which follows growth. */
  column<T extends Column>(make: (n: number) => T, width = 1): () => T {
    const entry = { array: make(this.#capacity * width) as Column, width, make: make as (n: number) => Column }
    this.#columns.push(entry)
    return () => entry.array as T
  }

  /**
   * The slot of the live entry for the key, or -1. `accept` lets a caller require a
   * column to match too (a scope, a source), so entries of two owners whose hashes
   * collide are never mistaken for each other.
   */
  find(hi: number, lo: number, now: number, accept?: (slot: number) => boolean): number {
    const mask = this.#table.length - 1
    for (let cell = this.#home(hi, lo); ; cell = (cell + 1) & mask) {
      const ref = this.#table[cell] as number
      if (ref === 0) return -1
      const slot = ref - 1
      if (this.#keyHi[slot] === hi && this.#keyLo[slot] === lo && (this.#expiresAt[slot] as number) >= now && (accept === undefined || accept(slot))) {
        return slot
      }
    }
  }

  /** Adds an entry and returns its slot, for the caller to fill its columns. */
  insert(hi: number, lo: number, expiresAt: number): number {
    if (this.#count >= this.#growAt) this.#grow()
    const slot = (this.#head + this.#count) & (this.#capacity - 1)
    this.#count++
    this.#keyHi[slot] = hi
    this.#keyLo[slot] = lo
    this.#expiresAt[slot] = expiresAt
    this.#place(slot)
    return slot
  }

  /**
   * The entries still live at `now`, in ring order, copied out compactly. Entries expire
   * roughly in ring order, so the live ones lie in a few runs of consecutive slots (one,
   * or two where the ring wraps), each copied in one block: a shard of tens of thousands
   * of entries takes well under a millisecond.
   */
  exportLive(now: number): IndexPart {
    const mask = this.#capacity - 1
    // [start, end) slot ranges, in ring order.
    const runs: number[] = []
    let live = 0
    for (let i = 0; i < this.#count; i++) {
      const slot = (this.#head + i) & mask
      if ((this.#expiresAt[slot] as number) < now) continue
      live++
      if (runs.length > 0 && runs[runs.length - 1] === slot) runs[runs.length - 1] = slot + 1
      else runs.push(slot, slot + 1)
    }
    const pick = <T extends Column>(array: T, make: (n: number) => Column, width: number): T => {
      const out = make(live * width) as T
      let at = 0
      for (let r = 0; r < runs.length; r += 2) {
        const from = (runs[r] as number) * width
        const to = (runs[r + 1] as number) * width
        out.set(array.subarray(from, to) as never, at)
        at += to - from
      }
      return out
    }
    return {
      count: live,
      keyHi: pick(this.#keyHi, (n) => new Uint32Array(n), 1),
      keyLo: pick(this.#keyLo, (n) => new Uint32Array(n), 1),
      expiresAt: pick(this.#expiresAt, (n) => new Float64Array(n), 1),
      columns: this.#columns.map((c) => pick(c.array, c.make, c.width)),
    }
  }

  /**
   * Inserts the entries of a part that `exportLive` made from an index with the same
   * columns, skipping those expired by `now`; `onAdded` sees each new slot. If it throws,
   * the index holds part of the part and is to be dropped.
   */
  importPart(part: IndexPart, now: number, onAdded?: (slot: number) => void): void {
    const n = part.count
    const shaped =
      part.keyHi.length === n &&
      part.keyLo.length === n &&
      part.expiresAt.length === n &&
      part.columns.length === this.#columns.length &&
      this.#columns.every((c, k) => (part.columns[k] as Column).length === n * c.width)
    if (!shaped) throw new RangeError('the part does not have the shape of this index')
    // Keys under a secret hash step over about one occupied cell each at this table's
    // fill; keys chosen to share a home would step over ever more, quadratic in the part.
    // The part comes from a file: past a generous budget it is refused (and the caller
    // drops this index) rather than taking minutes.
    const budget = this.#probes + IMPORT_PROBES_PER_ENTRY * n + IMPORT_PROBES_FLOOR
    for (let i = 0; i < n; i++) {
      const expiresAt = part.expiresAt[i] as number
      if (expiresAt < now) continue
      const slot = this.insert(part.keyHi[i] as number, part.keyLo[i] as number, expiresAt)
      if (this.#probes > budget) throw new RangeError('the part holds keys that crowd into one place of the table: not made by exportLive under this hash')
      for (let k = 0; k < this.#columns.length; k++) {
        const { array, width } = this.#columns[k] as { array: Column; width: number }
        const from = part.columns[k] as Column
        for (let j = 0; j < width; j++) array[slot * width + j] = from[i * width + j] as number
      }
      onAdded?.(slot)
    }
  }

  /** Evicts up to `budget` expired entries from the head. */
  expire(now: number, budget = Number.POSITIVE_INFINITY): void {
    while (this.#count > 0 && budget-- > 0) {
      const slot = this.#head
      if ((this.#expiresAt[slot] as number) >= now) return
      this.#unplace(slot)
      this.#onEvict?.(slot)
      this.#head = (this.#head + 1) & (this.#capacity - 1)
      this.#count--
    }
  }

  /** The table cell where probing for a key starts. */
  #home(hi: number, lo: number): number {
    return (hi ^ Math.imul(lo, 0x9e3779b1)) & (this.#table.length - 1)
  }

  #homeOf(slot: number): number {
    return this.#home(this.#keyHi[slot] as number, this.#keyLo[slot] as number)
  }

  #place(slot: number): void {
    const mask = this.#table.length - 1
    let cell = this.#homeOf(slot)
    while (this.#table[cell] !== 0) {
      cell = (cell + 1) & mask
      this.#probes++
    }
    this.#table[cell] = slot + 1
  }

  /** Backward-shift deletion: keeps every probe chain unbroken without tombstones. */
  #unplace(slot: number): void {
    const table = this.#table
    const mask = table.length - 1
    let cell = this.#homeOf(slot)
    while (table[cell] !== slot + 1) {
      if (table[cell] === 0) return
      cell = (cell + 1) & mask
    }
    let hole = cell
    for (let next = (hole + 1) & mask; table[next] !== 0; next = (next + 1) & mask) {
      const other = (table[next] as number) - 1
      const home = this.#homeOf(other)
      // Move `other` into the hole unless its home lies cyclically in (hole, next].
      const inRange = hole <= next ? home > hole && home <= next : home > hole || home <= next
      if (!inRange) {
        table[hole] = table[next] as number
        hole = next
      }
    }
    table[hole] = 0
  }

  /**
   * Doubles the ring, keeping entry order, and rebuilds the table. The live entries
   * run from the head and wrap at most once, so two block copies per column move them
   * to the start of the new ring (a copy per entry stalled the event loop for over
   * 100 ms at a quarter million entries). In a ring that is not full the copies also
   * carry unused slots; they land past the live entries and are overwritten on insert.
   */
  #grow(): void {
    const old = this.#capacity
    const capacity = old * 2
    const head = this.#head
    const remap = <T extends Column>(array: T, make: (n: number) => Column, width: number): T => {
      const next = make(capacity * width) as T
      next.set(array.subarray(head * width, old * width), 0)
      next.set(array.subarray(0, head * width), (old - head) * width)
      return next
    }
    this.#keyHi = remap(this.#keyHi, (n) => new Uint32Array(n), 1)
    this.#keyLo = remap(this.#keyLo, (n) => new Uint32Array(n), 1)
    this.#expiresAt = remap(this.#expiresAt, (n) => new Float64Array(n), 1)
    for (const c of this.#columns) c.array = remap(c.array, c.make, c.width)
    this.#capacity = capacity
    this.#growAt = this.#growThreshold()
    this.#head = 0
    this.#table = new Uint32Array(capacity * 2)
    for (let slot = 0; slot < this.#count; slot++) this.#place(slot)
  }
}

/**
 * ExpiringIndex split by the key's low bits into shards that grow one at a time, so a
 * growth copies 1/32 of the entries: the stall at millions of entries stays a few
 * milliseconds instead of a second.
 *
 * Keys spread evenly, so shards that all grew when full would fill up together and
 * double within a fraction of a second of each other: measured at 16,384 entries a
 * shard, 64 growths (nonces and dedup) of up to 7 ms each, 113 ms in 2 s, during a
 * benchmark burst. Each shard therefore grows at its own fill level, spread evenly from
 * full down to LOWEST_GROW_FILL, and the growths of one doubling come one at a time
 * across the last third of it. The price is unused room: the shards together hold 1.5
 * to 2 times the room their entries need instead of 1 to 2, a quarter more on average
 * and the same at worst.
 */
export class ShardedExpiringIndex {
  static readonly SHARDS = 32
  static readonly LOWEST_GROW_FILL = 2 / 3
  readonly shards: readonly ExpiringIndex[]
  #nextToExpire = 0

  constructor(options: { initialCapacity: number; onEvict?: (shard: number, slot: number) => void }) {
    const { SHARDS, LOWEST_GROW_FILL } = ShardedExpiringIndex
    const perShard = Math.max(16, Math.ceil(options.initialCapacity / SHARDS))
    const onEvict = options.onEvict
    this.shards = Array.from(
      { length: SHARDS },
      (_, i) =>
        new ExpiringIndex({
          initialCapacity: perShard,
          growAtFill: 1 - ((1 - LOWEST_GROW_FILL) * i) / (SHARDS - 1),
          ...(onEvict ? { onEvict: (slot: number) => onEvict(i, slot) } : {}),
        }),
    )
  }

  shardOf(hi: number): number {
    return hi & (ShardedExpiringIndex.SHARDS - 1)
  }

  get size(): number {
    let n = 0
    for (const s of this.shards) n += s.size
    return n
  }

  /** A little expiry per call, on two shards in turn; `sweep` does the rest. */
  expireSome(now: number, budget: number): void {
    for (let i = 0; i < 2; i++) {
      ;(this.shards[this.#nextToExpire] as ExpiringIndex).expire(now, budget)
      this.#nextToExpire = (this.#nextToExpire + 1) % ShardedExpiringIndex.SHARDS
    }
  }

  sweep(now: number): void {
    for (const s of this.shards) s.expire(now)
  }

  /** Each shard's live entries at `now`, for a snapshot: a shard is copied when it is asked for. */
  exportLive(now: number): IndexParts {
    return { length: this.shards.length, at: (i) => this.shards[i]?.exportLive(now) }
  }

  /**
   * Inserts parts exported from an index keyed by the same hash, each into its own
   * shard, letting the event loop run between shards (millions of entries take seconds).
   */
  async importParts(parts: readonly IndexPart[], now: number, onAdded?: (shard: number, slot: number) => void): Promise<void> {
    if (parts.length !== this.shards.length) throw new RangeError(`expected ${this.shards.length} parts, got ${parts.length}`)
    for (const [i, part] of parts.entries()) {
      ;(this.shards[i] as ExpiringIndex).importPart(part, now, onAdded && ((slot) => onAdded(i, slot)))
      await yieldToLoop()
    }
  }
}
