import Type from 'typebox'
import { compileCheck } from './schema-problem.js'

/** Chains a source may declare in `coverage.chains`; tokens are validated per chain. */
export const CHAINS = ['solana', 'ethereum', 'base', 'arbitrum', 'optimism', 'polygon', 'bsc', 'avalanche'] as const

const Name = (description: string) => Type.String({ minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9_-]+$', description })

/**
 * Token bucket, over which a push gets 429: `rate` tokens refill per `per`, up to `burst`
 * (default: `rate`). The schema only keeps the numbers sane (`rate` up to 100,000 a
 * second's worth of any period); what a source may really ask for is the operator's
 * ceiling, a rate per second (rateCeilingProblem).
 */
export const MaxRate = Type.Object(
  {
    rate: Type.Integer({ minimum: 1, maximum: 360_000_000 }),
    per: Type.Union([Type.Literal('second'), Type.Literal('minute'), Type.Literal('hour')]),
    burst: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
  },
  { additionalProperties: false },
)

/** Length of a `max_rate.per` period in milliseconds. */
export const PERIOD_MS = { second: 1000, minute: 60_000, hour: 3_600_000 } as const

type MaxRateValue = Type.Static<typeof MaxRate>

/**
 * The operator's bound on what a creator may declare (INGEST_MAX_RATE_PER_S,
 * INGEST_MAX_BURST): a manifest is the creator's word, while memory for nonces and
 * dedup grows with the rate the gateway lets a source reach.
 */
export interface RateCeiling {
  readonly perSecond: number
  readonly burst: number
}

/** Signals a max_rate lets through per millisecond, over time (the token bucket's refill). */
export const ratePerMs = (maxRate: MaxRateValue): number => maxRate.rate / PERIOD_MS[maxRate.per]
const perSecond = (maxRate: MaxRateValue) => ratePerMs(maxRate) * 1000

/** Why `maxRate` asks for more than `ceiling` allows, or undefined when it fits. */
export function rateCeilingProblem(maxRate: MaxRateValue, ceiling: RateCeiling): string | undefined {
  if (perSecond(maxRate) > ceiling.perSecond) return `manifest.max_rate: ${maxRate.rate} per ${maxRate.per} is above this gateway's ceiling of ${ceiling.perSecond} per second`
  const burst = maxRate.burst ?? maxRate.rate
  if (burst > ceiling.burst) return `manifest.max_rate.burst: ${burst}${maxRate.burst === undefined ? ' (the rate, as no burst is given)' : ''} is above this gateway's ceiling of ${ceiling.burst}`
  return undefined
}

/**
 * The rate the gateway enforces: the manifest's, or the ceiling where the operator has
 * lowered it since the source registered. Returns `maxRate` itself when it fits, so the
 * common case allocates nothing.
 */
export function enforcedMaxRate(maxRate: MaxRateValue, ceiling: RateCeiling): MaxRateValue {
  if (rateCeilingProblem(maxRate, ceiling) === undefined) return maxRate
  const rate = perSecond(maxRate) > ceiling.perSecond ? { rate: ceiling.perSecond, per: 'second' as const } : { rate: maxRate.rate, per: maxRate.per }
  return { ...rate, burst: Math.min(maxRate.burst ?? maxRate.rate, ceiling.burst) }
}

/** The source manifest: what kind of source it is, never how it decides. */
export const Manifest = Type.Object(
  {
    archetype: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'role the source maps to, e.g. wallet-watcher' }),
    schema_version: Type.Literal('1.0', { description: 'payload schema the source emits' }),
    severity_levels: Type.Array(Name('a severity tag'), { minItems: 1, maxItems: 16, uniqueItems: true }),
    max_rate: MaxRate,
    coverage: Type.Object(
      {
        chains: Type.Array(Type.Union(CHAINS.map((c) => Type.Literal(c))), { minItems: 1, maxItems: CHAINS.length, uniqueItems: true }),
        wallet_set_size: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
      },
      { additionalProperties: false },
    ),
    contact: Type.String({ minLength: 3, maxLength: 254, description: 'operational contact for incidents' }),
  },
  { additionalProperties: false },
)
export type Manifest = Type.Static<typeof Manifest>

/**
 * How long public readers wait for a receipt, by default: a day. Renters pay for the live
 * feed; the public gets the track record. A day is past the scoring windows of most
 * signals, so a public reader sees how a signal did rather than acts on it.
 */
export const PUBLIC_DELAY_DEFAULT_S = 86_400
/**
 * At least an hour: shorter would make the delayed view a near-live feed, and a signal's
 * `ts` may lie minutes ahead of the gateway's clock (two 300 s skew allowances).
 */
export const PUBLIC_DELAY_MIN_S = 3600
/** At most 30 days: longer hides the track record the public view exists to show. */
export const PUBLIC_DELAY_MAX_S = 30 * 86_400

/** How much of a source the public may see before renting. */
export const Listing = Type.Object(
  {
    public_receipts: Type.Boolean({ default: false }),
    /** Optional in records kept before it existed; read through publicDelaySeconds(). */
    public_delay_seconds: Type.Optional(Type.Integer({ minimum: PUBLIC_DELAY_MIN_S, maximum: PUBLIC_DELAY_MAX_S, default: PUBLIC_DELAY_DEFAULT_S })),
  },
  { additionalProperties: false },
)
export type Listing = Type.Static<typeof Listing>

/** The listing's public delay, or the default for a listing stored before the field existed. */
export const publicDelaySeconds = (listing: Listing): number => listing.public_delay_seconds ?? PUBLIC_DELAY_DEFAULT_S

/** Validates a manifest; a failure names the first bad field. */
export const checkManifest = compileCheck<Manifest>(Manifest, 'manifest')
