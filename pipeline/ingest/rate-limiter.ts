import { ratePerMs, type Manifest } from '../../schemas/index.js'

interface Bucket {
  tokens: number
  updatedAt: number
  /** Start of the current run of refusals, and its last: a run goes on while refusals come less than a minute apart. */
  overRateSince: number
  lastRefusedAt: number
}

/** A minute without a refusal ends a run of over-rate. */
const RUN_GAP_MS = 60_000

export type RateDecision = { readonly ok: true } | { readonly ok: false; readonly retryAfterS: number; readonly sustained: boolean }

/**
 * The manifest's `max_rate` as a token bucket per source (`{ rate, per, burst }`, 429 over it): `rate`
 * tokens per `per`, holding at most `burst` (default `rate`). A refusal tells the
 * client when one token will be back (RFC 6585 Retry-After). Refusals that go on for
 * `flagAfterMinutes`, never a minute apart, are sustained over-rate, which flags the source for review: a burst
 * of seconds is not, however many minutes' boundaries it straddles, nor is a client
 * that waits out each Retry-After of a slow rate.
 */
export class RateLimiter {
  readonly #buckets = new Map<string, Bucket>()
  readonly #flagAfterMinutes: number

  constructor(options: { flagAfterMinutes: number }) {
    this.#flagAfterMinutes = options.flagAfterMinutes
  }

  take(sourceId: string, maxRate: Manifest['max_rate'], now: number): RateDecision {
    const capacity = maxRate.burst ?? maxRate.rate
    const perMs = ratePerMs(maxRate)
    let bucket = this.#buckets.get(sourceId)
    if (bucket === undefined) {
      bucket = { tokens: capacity, updatedAt: now, overRateSince: 0, lastRefusedAt: Number.NEGATIVE_INFINITY }
      this.#buckets.set(sourceId, bucket)
    }
    bucket.tokens = Math.min(capacity, bucket.tokens + Math.max(0, now - bucket.updatedAt) * perMs)
    bucket.updatedAt = now
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1
      return { ok: true }
    }
    if (now - bucket.lastRefusedAt >= RUN_GAP_MS) bucket.overRateSince = now
    bucket.lastRefusedAt = now
    return {
      ok: false,
      // The epsilon keeps float noise (1 / (1 / 3 600 000)) from adding a whole second.
      retryAfterS: Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000 - 1e-9)),
      sustained: now - bucket.overRateSince >= this.#flagAfterMinutes * 60_000,
    }
  }

  /** Gives back the token of a request refused after `take` for a reason of the gateway's own (no dedup room). */
  refund(sourceId: string): void {
    const bucket = this.#buckets.get(sourceId)
    if (bucket !== undefined) bucket.tokens += 1
  }
}
