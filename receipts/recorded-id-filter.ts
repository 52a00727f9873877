/**
 * A Bloom filter of recorded receipt ids: "certainly not recorded" or "perhaps recorded".
 * It never answers "not recorded" for an id it was given, so an id it clears can be
 * written without asking the store, and only the ids it may hold are looked up.
 *
 * A receipt id is `rc_` and 32 hex digits of a SHA-256, already uniform: its first 16
 * digits give the two 32-bit hashes of double hashing, with no hashing of our own.
 * 10 bits and 7 probes an id give about 1 % false positives at capacity; past capacity
 * the rate rises (a full filter answers "perhaps" to everything), which costs look-ups,
 * never a wrong answer.
 */
const BITS_PER_ID = 10
const PROBES = 7

export class RecordedIdFilter {
  readonly capacity: number
  readonly #bits: Uint32Array
  readonly #m: number
  #added = 0

  constructor(capacity: number) {
    this.capacity = Math.max(1, Math.floor(capacity))
    this.#m = this.capacity * BITS_PER_ID
    this.#bits = new Uint32Array(Math.ceil(this.#m / 32))
  }

  /** Ids given so far (an id given twice counts twice). */
  get added(): number {
    return this.#added
  }

  /** The filter's memory in bytes. */
  get bytes(): number {
    return this.#bits.byteLength
  }

  /** `key`: the 16 hex digits after `rc_` (receiptKeyOf). */
  addKey(key: string): void {
    const [h1, h2] = hashesOf(key)
    for (let i = 0; i < PROBES; i++) {
      const bit = (h1 + i * h2) % this.#m
      this.#bits[bit >>> 5]! |= 1 << (bit & 31)
    }
    this.#added++
  }

  add(receiptId: string): void {
    this.addKey(receiptKeyOf(receiptId))
  }

  /** Ids that are not a receipt id's shape are "perhaps": they are looked up. */
  mayHold(receiptId: string): boolean {
    const key = receiptKeyOf(receiptId)
    if (!/^[0-9a-f]{16}$/.test(key)) return true
    const [h1, h2] = hashesOf(key)
    for (let i = 0; i < PROBES; i++) {
      const bit = (h1 + i * h2) % this.#m
      if ((this.#bits[bit >>> 5]! & (1 << (bit & 31))) === 0) return false
    }
    return true
  }
}

/** Two unsigned 32-bit hashes; the second odd, so the probes differ. */
function hashesOf(key: string): [number, number] {
  return [parseInt(key.slice(0, 8), 16) >>> 0, (parseInt(key.slice(8, 16), 16) | 1) >>> 0]
}

/** The part of a receipt id the filter hashes: 16 hex digits after `rc_`. */
export const receiptKeyOf = (receiptId: string): string => receiptId.slice(3, 19)
