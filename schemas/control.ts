import Type from 'typebox'
import { compileCheck } from './schema-problem.js'

/**
 * Ids chosen by clients (agent ids, creator and renter subjects). Not `.` or `..`: as a
 * path segment (`/v1/byo/agents/..`) HTTP clients resolve them away before sending.
 */
export const ClientId = Type.String({ minLength: 1, maxLength: 128, pattern: '^(?!\\.\\.?$)[A-Za-z0-9_:.-]+$' })

/**
 * A source id as the gateway issues it (registry newId): `src_` and 12 random bytes in
 * base64url, 16 characters. Nothing else names a source, so a filter holding anything
 * else is a mistake worth a 400 rather than an empty list.
 */
export const SourceId = Type.String({ minLength: 20, maxLength: 20, pattern: '^src_[A-Za-z0-9_-]{16}$' })

/**
 * A list's cursor, the `next_cursor` of its previous page, in the characters every list's
 * cursors are made of (item ids, `id.time`, base64url, a base-36 prefix). Which cursor
 * names something is each list's own check.
 */
export const Cursor = Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9_:.-]+$', description: "the previous page's next_cursor" })

export const CreateTokenRequest = Type.Object(
  { role: Type.Union([Type.Literal('creator'), Type.Literal('renter'), Type.Literal('metrics'), Type.Literal('scorer')]), subject: ClientId },
  { additionalProperties: false },
)
export type CreateTokenRequest = Type.Static<typeof CreateTokenRequest>

/** Sources one agent can hold. */
export const MAX_SLOTS_PER_AGENT = 1000

export const CreateAgentRequest = Type.Object(
  { agent_id: ClientId, creator_id: ClientId, slots: Type.Integer({ minimum: 1, maximum: MAX_SLOTS_PER_AGENT }) },
  { additionalProperties: false },
)
export type CreateAgentRequest = Type.Static<typeof CreateAgentRequest>

/**
 * The manifest and listing are checked by their own schemas, so a bad manifest, a
 * missing one included, gets invalid_manifest (the route requires it).
 */
export const CreateSourceRequest = Type.Object(
  { agent_id: ClientId, manifest: Type.Optional(Type.Unknown()), listing: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
)
export type CreateSourceRequest = Type.Static<typeof CreateSourceRequest>

export const RegisterKeyRequest = Type.Object(
  { public_key: Type.String({ minLength: 1, maxLength: 1024, description: 'base64 or base64url of the 32 raw bytes, or a PEM SPKI block' }) },
  { additionalProperties: false },
)
export type RegisterKeyRequest = Type.Static<typeof RegisterKeyRequest>

/** An agent's slots, changed by the operator; never below the sources it holds (409 slots_in_use). */
export const UpdateAgentRequest = Type.Object({ slots: Type.Integer({ minimum: 1, maximum: MAX_SLOTS_PER_AGENT }) }, { additionalProperties: false })
export type UpdateAgentRequest = Type.Static<typeof UpdateAgentRequest>

/**
 * A source's manifest and listing, each replaced whole when given (the manifest is
 * checked by its own schema, as at registration, so a bad one gets invalid_manifest).
 */
export const UpdateSourceRequest = Type.Object(
  { manifest: Type.Optional(Type.Unknown()), listing: Type.Optional(Type.Unknown()) },
  { additionalProperties: false },
)
export type UpdateSourceRequest = Type.Static<typeof UpdateSourceRequest>

/** Why a key was revoked: a planned rotation, or a leak (revoked at once, then possibly a dispute). */
export const REVOCATION_REASONS = ['rotation', 'compromise'] as const
export type RevocationReason = (typeof REVOCATION_REASONS)[number]

export const RevokeKeyRequest = Type.Object(
  { reason: Type.Optional(Type.Union(REVOCATION_REASONS.map((r) => Type.Literal(r)))) },
  { additionalProperties: false },
)
export type RevokeKeyRequest = Type.Static<typeof RevokeKeyRequest>

export const checkCreateToken = compileCheck<CreateTokenRequest>(CreateTokenRequest, 'body')
export const checkCreateAgent = compileCheck<CreateAgentRequest>(CreateAgentRequest, 'body')
export const checkCreateSource = compileCheck<CreateSourceRequest>(CreateSourceRequest, 'body')
export const checkRegisterKey = compileCheck<RegisterKeyRequest>(RegisterKeyRequest, 'body')
export const checkUpdateAgent = compileCheck<UpdateAgentRequest>(UpdateAgentRequest, 'body')
export const checkUpdateSource = compileCheck<UpdateSourceRequest>(UpdateSourceRequest, 'body')
export const checkRevokeKey = compileCheck<RevokeKeyRequest>(RevokeKeyRequest, 'body')

/** The evidence a review reads, and its note on the decision. */
const DisputeText = Type.String({ minLength: 1, maxLength: 1000 })

/**
 * The last step after a key leak: with the key revoked and workers rotated, the creator
 * disputes the bad signals the leaked key emitted before its revocation.
 */
export const OpenDisputeRequest = Type.Object(
  {
    key_id: Type.String({ minLength: 1, maxLength: 128, description: 'the leaked key; revoked before the dispute is opened' }),
    signals: Type.Array(
      Type.Object(
        {
          signal_id: Type.String({ pattern: '^[A-Za-z0-9_:-]{8,128}$' }),
          received_at: Type.String({ maxLength: 64, description: 'as the 202 answered: how the signal is found in the log' }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 100, description: 'signals this source accepted under the leaked key, each once' },
    ),
    evidence: DisputeText,
  },
  { additionalProperties: false },
)
export type OpenDisputeRequest = Type.Static<typeof OpenDisputeRequest>

export const ResolveDisputeRequest = Type.Object({ resolution: Type.Optional(DisputeText) }, { additionalProperties: false })
export type ResolveDisputeRequest = Type.Static<typeof ResolveDisputeRequest>

export const checkOpenDispute = compileCheck<OpenDisputeRequest>(OpenDisputeRequest, 'body')
export const checkResolveDispute = compileCheck<ResolveDisputeRequest>(ResolveDisputeRequest, 'body')
