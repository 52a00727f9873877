/**
 * A set of 64-bit fingerprints (two 32-bit halves, never both zero), 8 bytes an entry
 * at a load of at most three quarters, outside the garbage-collected heap. Split into
 * 32 shards that each grow by doubling on their own, so a growth copies 1/32 of the
 * entries and never stalls the event loop for long. No removal: a set is dropped whole.
 */
const SHARDS = 32
const INITIAL_SLOTS = 1 << 10

class Shard {
  hi = new Uint32Array(INITIAL_SLOTS)
  lo = new Uint32Array(INITIAL_SLOTS)
  size = 0

  /** The slot holding the fingerprint, or the empty slot where it would go. */
  slotOf(hi: number, lo: number): number {
    const mask = this.hi.length - 1
    // The low half picked the shard (its 5 lowest bits); the high half picks the slot.
    let i = hi & mask
    for (;;) {
      const h = this.hi[i] as number
      const l = this.lo[i] as number
      if ((h === hi && l === lo) || (h === 0 && l === 0)) return i
      i = (i + 1) & mask
    }
  }

  add(hi: number, lo: number): boolean {
    const i = this.slotOf(hi, lo)
    if (this.hi[i] !== 0 || this.lo[i] !== 0) return false
    this.hi[i] = hi
    this.lo[i] = lo
    if (++this.size * 4 > this.hi.length * 3) this.#grow()
    return true
  }

  #grow(): void {
    const { hi, lo } = this
    this.hi = new Uint32Array(hi.length * 2)
    this.lo = new Uint32Array(lo.length * 2)
    for (let i = 0; i < hi.length; i++) {
      const h = hi[i] as number
      const l = lo[i] as number
      if (h === 0 && l === 0) continue
      const j = this.slotOf(h, l)
      this.hi[j] = h
      this.lo[j] = l
    }
  }
}

export class FingerprintSet {
  readonly #shards = Array.from({ length: SHARDS }, () => new Shard())
  #size = 0

  get size(): number {
    return this.#size
  }

  has(hi: number, lo: number): boolean {
    const shard = this.#shards[lo & (SHARDS - 1)] as Shard
    const i = shard.slotOf(hi, lo)
    return shard.hi[i] !== 0 || shard.lo[i] !== 0
  }

  /** Adds the fingerprint; false if it was already there. */
  add(hi: number, lo: number): boolean {
    const added = (this.#shards[lo & (SHARDS - 1)] as Shard).add(hi, lo)
    if (added) this.#size++
    return added
  }

  /** Every fingerprint as (hi, lo) pairs back to back, for a file. */
  toPairs(): Uint32Array {
    const out = new Uint32Array(this.#size * 2)
    let n = 0
    for (const shard of this.#shards) {
      for (let i = 0; i < shard.hi.length; i++) {
        const h = shard.hi[i] as number
        const l = shard.lo[i] as number
        if (h === 0 && l === 0) continue
        out[n++] = h
        out[n++] = l
      }
    }
    return out
  }

  static fromPairs(pairs: Uint32Array): FingerprintSet {
    const set = new FingerprintSet()
    for (let i = 0; i + 1 < pairs.length; i += 2) set.add(pairs[i] as number, pairs[i + 1] as number)
    return set
  }
}
