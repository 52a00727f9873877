/**
 * Remembers dedup ids for `windowMs`, like JetStream's duplicate window: a second
 * append with a remembered id is answered with the first record's seq and writes
 * nothing.
 *
 * Memory: each remembered id costs about 190 bytes plus the id's length on 64-bit Node
 * without pointer compression (the entry object and its boxed time, the Map slot, the
 * expiry-queue slot, the key string); measured: 232 bytes per entry with 41-byte ids.
 * At a 20-minute window (it must outlast every retry that can still pass the two
 * 300 s checks) that is ~280 KB per sustained append/s: 1,000 appends/s holds 1.2 M
 * ids, ~280 MB. Entries leave by time only, never by count, because forgetting an id
 * early would let a retry create a second record.
 */

export interface DedupEntry {
  readonly id: string
  readonly seq: number
  readonly time: number
  /**
   * Set while the first append is not yet durable: a duplicate must not be answered
   * before the original could be, or a retry would get its 202 first.
   */
  pending: Promise<void> | undefined
}

/** Queue compaction threshold: below it, the dead head costs less than copying. */
const COMPACT_MIN = 1024

export class DedupIndex {
  readonly windowMs: number
  readonly #byId = new Map<string, DedupEntry>()
  /** Entries in append order, which is time order: expiry pops from the head. */
  #queue: DedupEntry[] = []
  #head = 0

  constructor(windowMs: number) {
    this.windowMs = windowMs
  }

  get size(): number {
    return this.#byId.size
  }

  /** The live entry for `id`, if its window has not passed at `now`. */
  get(id: string, now: number): DedupEntry | undefined {
    const entry = this.#byId.get(id)
    if (entry === undefined) return undefined
    // Checked here as well as in `sweep`, so expiry is exact whatever the sweep period.
    if (this.#expired(entry, now)) {
      this.#byId.delete(id)
      return undefined
    }
    return entry
  }

  add(id: string, seq: number, time: number, pending?: Promise<void>): DedupEntry {
    const entry: DedupEntry = { id, seq, time, pending }
    this.#byId.set(id, entry)
    this.#queue.push(entry)
    return entry
  }

  /** Drops every entry whose window has passed. */
  sweep(now: number): void {
    const q = this.#queue
    while (this.#head < q.length && this.#expired(q[this.#head]!, now)) {
      const entry = q[this.#head]!
      // The id may have been re-added after an earlier expiry: only drop this entry.
      if (this.#byId.get(entry.id) === entry) this.#byId.delete(entry.id)
      q[this.#head] = undefined as unknown as DedupEntry
      this.#head++
    }
    if (this.#head >= COMPACT_MIN && this.#head * 2 >= q.length) {
      this.#queue = q.slice(this.#head)
      this.#head = 0
    }
  }

  clear(): void {
    this.#byId.clear()
    this.#queue = []
    this.#head = 0
  }

  #expired(entry: DedupEntry, now: number): boolean {
    return now - entry.time >= this.windowMs
  }
}
