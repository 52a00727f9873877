import type { ReadRateLimiter } from './read-rate-limiter.js'

interface Bucket {
  tokens: number
  at: number
}

/**
 * The in-process ReadRateLimiter: allowances in a Map kept in least-recently-used order
 * (a key read is moved to the end), at most `maxTracked` of them. Past it the least
 * recently used is forgotten, and starts full if it comes back: memory stays bounded
 * however many addresses call, at the price of a caller that cycles through more than
 * `maxTracked` keys (an IPv6 /64 each) getting fresh allowances. Per process: behind a
 * load balancer each process lets a key through at the full rate.
 */
export class MemoryReadRateLimiter implements ReadRateLimiter {
  readonly #buckets = new Map<string, Bucket>()
  readonly #maxTracked: number
  readonly #now: () => number

  constructor(maxTracked: number, now: () => number = Date.now) {
    this.#maxTracked = maxTracked
    this.#now = now
  }

  /** Allowances held now. */
  get size(): number {
    return this.#buckets.size
  }

  async take(key: string, perMinute: number): Promise<number> {
    const now = this.#now()
    const perMs = perMinute / 60_000
    let bucket = this.#buckets.get(key)
    if (bucket === undefined) {
      bucket = { tokens: perMinute, at: now }
      if (this.#buckets.size >= this.#maxTracked) {
        const oldest = this.#buckets.keys().next().value
        if (oldest !== undefined) this.#buckets.delete(oldest)
      }
    } else {
      this.#buckets.delete(key)
      bucket.tokens = Math.min(perMinute, bucket.tokens + Math.max(0, now - bucket.at) * perMs)
      bucket.at = now
    }
    this.#buckets.set(key, bucket)
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return 0
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000))
  }
}
