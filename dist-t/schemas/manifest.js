import Type from 'typebox';
import { compileCheck } from './schema-problem.js';
/** Chains a source may declare in `coverage.chains`; tokens are validated per chain. */
export const CHAINS = ['solana', 'ethereum', 'base', 'arbitrum', 'optimism', 'polygon', 'bsc', 'avalanche'];
const Name = (description) => Type.String({ minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9_-]+$', description });
/**
 * Token bucket (DESIGN.md section 4): `rate` tokens refill per `per`, up to `burst`
 * (default: `rate`). Bounded so a manifest cannot ask for more than the gateway serves.
 */
export const MaxRate = Type.Object({
    rate: Type.Integer({ minimum: 1, maximum: 100_000 }),
    per: Type.Union([Type.Literal('second'), Type.Literal('minute'), Type.Literal('hour')]),
    burst: Type.Optional(Type.Integer({ minimum: 1, maximum: 100_000 })),
}, { additionalProperties: false });
/** Length of a `max_rate.per` period in milliseconds. */
export const PERIOD_MS = { second: 1000, minute: 60_000, hour: 3_600_000 };
/** Spec section 2.1: what kind of source it is, never how it decides. */
export const Manifest = Type.Object({
    archetype: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.-]+$', description: 'role the source maps to, e.g. wallet-watcher' }),
    schema_version: Type.Literal('1.0', { description: 'payload schema the source emits' }),
    severity_levels: Type.Array(Name('a severity tag'), { minItems: 1, maxItems: 16, uniqueItems: true }),
    max_rate: MaxRate,
    coverage: Type.Object({
        chains: Type.Array(Type.Union(CHAINS.map((c) => Type.Literal(c))), { minItems: 1, maxItems: CHAINS.length, uniqueItems: true }),
        wallet_set_size: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000 })),
    }, { additionalProperties: false }),
    contact: Type.String({ minLength: 3, maxLength: 254, description: 'operational contact for incidents' }),
}, { additionalProperties: false });
/** How much of a source the public may see before renting (spec 4.2). */
export const Listing = Type.Object({ public_receipts: Type.Boolean({ default: false }) }, { additionalProperties: false });
/** Validates a manifest; a failure names the first bad field. */
export const checkManifest = compileCheck(Manifest, 'manifest');
//# sourceMappingURL=manifest.js.map