import Type from 'typebox'

export { signingString } from '@signal-ingest-gateway/sdk/signing-string'

/** The one skew limit for both checks: the request timestamp against the server clock, and the payload ts against the request timestamp, either way. */
export const MAX_SKEW_MS = 300_000

/** A nonce is remembered per (source, key) for 10 minutes: a reuse within that time is a replay. */
export const NONCE_WINDOW_MS = 600_000

/** Whether two instants (ms) are within the 300 s skew of each other, either way, inclusive. */
export const isWithinSkew = (a: number, b: number): boolean => Math.abs(a - b) <= MAX_SKEW_MS

/**
 * The ingest request body, with its field limits. This is the published contract (the
 * OpenAPI document is generated from it). The gateway enforces it with
 * `pipeline/validate/signal-fields.ts`, which also applies what a schema cannot say:
 * source_id equal to the URL's, ts within 300 s of the request timestamp, severity
 * among the manifest's levels, the token's chain and its EIP-55 checksum. A test keeps
 * the two in step.
 */
export const SignalPayloadSchema = Type.Object(
  {
    signal_id: Type.String({
      pattern: '^[A-Za-z0-9_:-]{8,128}$',
      minLength: 8,
      maxLength: 128,
      description: 'Unique per source; the basis of idempotency. Letters, digits, _, - and :.',
    }),
    source_id: Type.String({
      minLength: 1,
      description: 'Must equal :source_id in the URL and the X-Svc-Source-Id header.',
    }),
    ts: Type.String({
      pattern: '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,9})?(Z|\\+00:00)$',
      maxLength: 40,
      description:
        'Emission time, ISO 8601 in UTC (Z or +00:00), years 1970 to 9999. Must be within 300 seconds of X-Svc-Timestamp.',
    }),
    token: Type.String({
      pattern: '^(0x[0-9a-fA-F]{40}|[1-9A-HJ-NP-Za-km-z]{32,44})$',
      minLength: 32,
      maxLength: 44,
      description:
        "Address of the asset on one of the manifest's coverage.chains: base58 of 32 bytes on solana; 0x and 40 hex digits on EVM chains, where mixed case must be a valid EIP-55 checksum.",
    }),
    severity: Type.String({ minLength: 1, description: "One of the manifest's severity_levels." }),
    confidence: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    note: Type.Optional(
      Type.String({
        maxLength: 280,
        description: 'Short human-readable text, at most 280 characters (Unicode code points).',
      }),
    ),
  },
  {
    $id: 'SignalPayload',
    title: 'Signal payload',
    description: 'Body of POST /v1/byo/sources/{source_id}/signals. Unknown fields are refused.',
    additionalProperties: false,
  },
)
export type SignalPayloadSchema = Type.Static<typeof SignalPayloadSchema>

/** The 202 body of an accepted signal, a deduplicated retry included. */
export const AcceptedBody = Type.Object(
  {
    ok: Type.Literal(true),
    signal_id: Type.String(),
    source_id: Type.String(),
    status: Type.Literal('accepted'),
    received_at: Type.String({ description: 'ISO 8601 UTC arrival time; the original one for a deduplicated accept' }),
    test: Type.Optional(Type.Literal(true, { description: "present for a pending key's test signal" })),
    deduplicated: Type.Optional(Type.Literal(true, { description: 'present when this was a retry of an accepted signal' })),
    disputed: Type.Optional(Type.Literal(true, { description: 'present on a retry of a signal an accepted dispute moved to state disputed' })),
  },
  { additionalProperties: false },
)
export type AcceptedBody = Type.Static<typeof AcceptedBody>
