/**
 * A fixed-size latency histogram in microseconds, log-linear like HdrHistogram:
 * values below 64 µs are exact, above that every power of two is split into 64
 * buckets, so a bucket is at most 1/64 (1.6 %) of its value wide. 1,728 counters
 * cover 1 µs to 71 minutes in 7 kB, however many requests are recorded, which is
 * why the load generator never keeps a per-request array.
 */

const SUB_BITS = 6
const SUB = 1 << SUB_BITS
/** Octaves above the exact range: values up to 2^32 µs. */
const OCTAVES = 32 - SUB_BITS
export const BUCKETS = SUB + OCTAVES * SUB

function bucketOf(us: number): number {
  const v = us < 0 ? 0 : us >= 0xffffffff ? 0xffffffff : Math.floor(us)
  if (v < SUB) return v
  const exponent = 31 - Math.clz32(v)
  const shift = exponent - SUB_BITS
  return SUB + shift * SUB + ((v >>> shift) - SUB)
}

/** The highest value a bucket holds, so reported percentiles are never optimistic. */
function upperEdgeUs(bucket: number): number {
  if (bucket < SUB) return bucket
  const shift = Math.floor((bucket - SUB) / SUB)
  const mantissa = SUB + ((bucket - SUB) % SUB)
  return (mantissa + 1) * 2 ** shift - 1
}

export class LatencyHistogram {
  readonly counts: Float64Array
  total = 0
  maxUs = 0

  constructor(counts?: ArrayLike<number>) {
    this.counts = new Float64Array(BUCKETS)
    if (counts !== undefined) {
      for (let i = 0; i < BUCKETS; i++) this.counts[i] = counts[i] ?? 0
      for (let i = 0; i < BUCKETS; i++) {
        const c = this.counts[i] as number
        this.total += c
        if (c > 0) this.maxUs = upperEdgeUs(i)
      }
    }
  }

  recordMs(ms: number): void {
    const us = ms * 1000
    this.counts[bucketOf(us)]! += 1
    this.total++
    if (us > this.maxUs) this.maxUs = us
  }

  /** The value at quantile `q` (0..1) in milliseconds; NaN when empty. */
  quantileMs(q: number): number {
    if (this.total === 0) return Number.NaN
    const rank = Math.max(1, Math.ceil(q * this.total))
    let seen = 0
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i] as number
      if (seen >= rank) return Math.min(upperEdgeUs(i), this.maxUs) / 1000
    }
    return this.maxUs / 1000
  }

  /** Plain array for IPC (structured clone of a typed array works too, but JSON logs read better). */
  toArray(): number[] {
    return Array.from(this.counts)
  }
}
