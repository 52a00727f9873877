import type { Manifest } from '../../../schemas/index.js'
import type { RateBuckets } from '../ports.js'
import { refundToken, takeToken, type RateDecision, type TokenBucket } from '../token-bucket.js'

/**
 * Each source's token bucket in this process's memory: the one gateway of an embedded
 * deployment is the only one that takes tokens. A restart starts every bucket full, as a
 * client that waited as long would find it. One entry per source that pushed, bounded
 * by the registry's sources.
 */
export class LocalRateBuckets implements RateBuckets {
  readonly #buckets = new Map<string, TokenBucket>()
  readonly #flagAfterMinutes: number

  constructor(options: { readonly flagAfterMinutes: number }) {
    this.#flagAfterMinutes = options.flagAfterMinutes
  }

  take(sourceId: string, maxRate: Manifest['max_rate'], now: number): Promise<RateDecision> {
    const { bucket, decision } = takeToken(this.#buckets.get(sourceId), maxRate, now, this.#flagAfterMinutes)
    this.#buckets.set(sourceId, bucket)
    return Promise.resolve(decision)
  }

  refund(sourceId: string, maxRate: Manifest['max_rate']): Promise<void> {
    const bucket = refundToken(this.#buckets.get(sourceId), maxRate)
    if (bucket !== undefined) this.#buckets.set(sourceId, bucket)
    return Promise.resolve()
  }
}
