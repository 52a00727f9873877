import { ratePerMs, type Manifest } from '../../schemas/index.js'

/** One source's rate state, as every adapter of RateBuckets keeps it (JSON on a shared store). */
export interface TokenBucket {
  readonly tokens: number
  /** The latest time the bucket was refilled to: never moves back, whichever gateway's clock asks. */
  readonly updatedAt: number
  /** Start of the current run of refusals, and its last: a run goes on while refusals come less than a minute apart. */
  readonly overRateSince: number
  readonly lastRefusedAt: number
}

export type RateDecision = { readonly ok: true } | { readonly ok: false; readonly retryAfterS: number; readonly sustained: boolean }

/** A minute without a refusal ends a run of over-rate. */
const RUN_GAP_MS = 60_000

const capacityOf = (maxRate: Manifest['max_rate']) => maxRate.burst ?? maxRate.rate

/**
 * The manifest's `max_rate` as a token bucket (`{ rate, per, burst }`, 429 over it):
 * `rate` tokens per `per`, holding at most `burst` (default `rate`); a source never seen
 * starts full. A refusal tells the client when one token will be back (RFC 6585
 * Retry-After). Refusals that go on for `flagAfterMinutes`, never a minute apart, are
 * sustained over-rate, which flags the source for review: a burst of seconds is not,
 * however many minutes' boundaries it straddles, nor is a client that waits out each
 * Retry-After of a slow rate. Pure: the adapters decide where the state lives.
 */
export function takeToken(
  bucket: TokenBucket | undefined,
  maxRate: Manifest['max_rate'],
  now: number,
  flagAfterMinutes: number,
): { readonly bucket: TokenBucket; readonly decision: RateDecision } {
  const capacity = capacityOf(maxRate)
  const perMs = ratePerMs(maxRate)
  const before = bucket ?? { tokens: capacity, updatedAt: now, overRateSince: 0, lastRefusedAt: Number.NEGATIVE_INFINITY }
  // Another gateway's clock may be a little ahead: time never runs back, so no token is made twice.
  const updatedAt = Math.max(before.updatedAt, now)
  const tokens = Math.min(capacity, before.tokens + (updatedAt - before.updatedAt) * perMs)
  if (tokens >= 1) return { bucket: { ...before, tokens: tokens - 1, updatedAt }, decision: { ok: true } }
  const overRateSince = now - before.lastRefusedAt >= RUN_GAP_MS ? now : before.overRateSince
  return {
    bucket: { tokens, updatedAt, overRateSince, lastRefusedAt: Math.max(before.lastRefusedAt, now) },
    decision: {
      ok: false,
      // The epsilon keeps float noise (1 / (1 / 3 600 000)) from adding a whole second.
      retryAfterS: Math.max(1, Math.ceil((1 - tokens) / perMs / 1000 - 1e-9)),
      sustained: now - overRateSince >= flagAfterMinutes * 60_000,
    },
  }
}

/** Gives back one token (never past the burst): the request that took it was refused for a reason of the gateway's own. */
export function refundToken(bucket: TokenBucket | undefined, maxRate: Manifest['max_rate']): TokenBucket | undefined {
  if (bucket === undefined) return undefined
  return { ...bucket, tokens: Math.min(capacityOf(maxRate), bucket.tokens + 1) }
}
