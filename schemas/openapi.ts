import { ERROR_STATUS, ErrorBody } from './api-error.js'
import {
  CreateAgentRequest,
  CreateSourceRequest,
  CreateTokenRequest,
  OpenDisputeRequest,
  RegisterKeyRequest,
  ResolveDisputeRequest,
  RevokeKeyRequest,
  UpdateAgentRequest,
  UpdateSourceRequest,
} from './control.js'
import { SignalAcceptedEvent } from './events.js'
import { Listing, Manifest } from './manifest.js'
import { CreateRentalRequest, RENTAL_STATES, RentalView } from './rentals.js'
import { OUTCOMES_BODY_MAX_BYTES, OUTCOMES_PER_POST_MAX, OutcomeItem, OutcomesAnswer } from './scoring.js'
import { AcceptedBody, SignalPayloadSchema } from './signal.js'

const json = (schema: unknown) => ({ content: { 'application/json': { schema } } })
const ok = (data: unknown) => json({ type: 'object', properties: { ok: { const: true }, data } })
const errors = (...statuses: number[]) =>
  Object.fromEntries(statuses.map((s) => [String(s), { description: codesFor(s), ...json({ $ref: '#/components/schemas/ErrorBody' }) }]))
const codesFor = (status: number) =>
  `error codes: ${Object.entries(ERROR_STATUS)
    .filter(([, s]) => s === status)
    .map(([c]) => c)
    .join(', ')}`
const bearer = [{ bearer: [] }]
/**
 * What every bearer route may answer besides its own: 401 without a valid token, 403
 * for a token of the wrong role, 503 while draining. A route with a body adds 400
 * (not JSON, or not in time), 413 (too large) and 503 (too many slow uploads).
 */
const control = (...own: number[]) => errors(...new Set([401, 403, 503, ...own].sort((a, b) => a - b)))
const withBody = (...own: number[]) => control(400, 413, ...own)
/** Actions that take no input: no body at all, or `{}`. */
const noInput = { required: false, ...json({ type: 'object', maxProperties: 0 }) }
const path = (name: string) => ({ name, in: 'path', required: true, schema: { type: 'string' } })
const query = (name: string, schema: Record<string, unknown>) => ({ name, in: 'query', schema })
const page = (max: number) => [query('limit', { type: 'integer', minimum: 1, maximum: max }), query('cursor', { type: 'string' })]
const header = (name: string, description: string, required = true) => ({ name, in: 'header', required, description, schema: { type: 'string' } })

/** The review's decision on a dispute: the same request for either outcome. */
const decision = (action: 'accept' | 'reject', description: string) => ({
  [`/v1/byo/sources/{source_id}/disputes/{dispute_id}/${action}`]: {
    post: {
      security: bearer,
      parameters: [path('source_id'), path('dispute_id')],
      requestBody: json(ResolveDisputeRequest),
      responses: { '200': { description, ...ok({}) }, ...withBody(404, 409) },
    },
  },
})

/**
 * The OpenAPI 3.1 document, generated from the same TypeBox schemas the gateway
 * validates with, so the published contract cannot drift from the code.
 */
export function openApiDocument(serverUrl: string): Record<string, unknown> {
  return {
    openapi: '3.1.0',
    info: { title: 'Signal Ingest Gateway', version: '1', description: 'Signed ingest and control plane (spec Phase 2 draft).' },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: { ErrorBody, SignalPayload: SignalPayloadSchema, AcceptedBody, Manifest, Listing, SignalAcceptedEvent },
    },
    paths: {
      '/v1/byo/sources/{source_id}/signals': {
        post: {
          summary: 'Push one signed signal',
          parameters: [
            path('source_id'),
            header('X-Svc-Source-Id', 'equal to source_id'),
            header('X-Svc-Key-Id', 'a registered key of the source'),
            header('X-Svc-Timestamp', 'ISO 8601 UTC, within 300 s of the server clock'),
            header('X-Svc-Nonce', 'unique per source and key for 10 minutes; 1 to 128 visible ASCII characters'),
            header('X-Svc-Signature', 'ed25519=:<base64 signature>: over METHOD\\nPATH\\nTIMESTAMP\\nNONCE\\nsha256hex(raw body)'),
            header('Idempotency-Key', 'recommended: equal to signal_id', false),
          ],
          requestBody: { required: true, ...json({ $ref: '#/components/schemas/SignalPayload' }) },
          responses: { '202': { description: 'accepted', ...json({ $ref: '#/components/schemas/AcceptedBody' }) }, ...errors(400, 401, 409, 429, 503) },
        },
      },
      '/v1/admin/tokens': {
        post: { security: bearer, requestBody: json(CreateTokenRequest), responses: { '201': { description: 'token shown once', ...ok({}) }, ...withBody() } },
        get: {
          security: bearer,
          parameters: [
            { name: 'role', in: 'query', schema: { type: 'string', enum: ['creator', 'renter', 'metrics', 'scorer'] } },
            { name: 'subject', in: 'query', schema: { type: 'string' } },
            { name: 'state', in: 'query', schema: { type: 'string', enum: ['live', 'revoked'] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'token records (never the token or its hash), oldest first, with next_cursor', ...ok({ type: 'array' }) }, ...control(400) },
        },
      },
      '/v1/admin/tokens/{token_id}': { get: { security: bearer, parameters: [path('token_id')], responses: { '200': { description: 'token record', ...ok({}) }, ...control(404) } } },
      '/v1/admin/tokens/{token_id}/revoke': { post: { security: bearer, parameters: [path('token_id')], requestBody: noInput, responses: { '200': { description: 'revoked token record; repeating it changes nothing', ...ok({}) }, ...withBody(404) } } },
      '/v1/admin/agents': {
        post: { security: bearer, requestBody: json(CreateAgentRequest), responses: { '201': { description: 'agent', ...ok({}) }, ...withBody(409) } },
        get: {
          security: bearer,
          parameters: [query('creator_id', { type: 'string' }), ...page(1000)],
          responses: { '200': { description: 'agents with slots_used and open_slots, oldest first, with next_cursor (admin token)', ...ok({ type: 'array' }) }, ...control(400) },
        },
      },
      '/v1/admin/agents/{agent_id}': {
        patch: {
          security: bearer,
          parameters: [path('agent_id')],
          requestBody: json(UpdateAgentRequest),
          responses: { '200': { description: 'agent with its new slots (admin token); never below slots_used (409 slots_in_use)', ...ok({}) }, ...withBody(404, 409) },
        },
      },
      '/v1/byo/sources': {
        post: { security: bearer, requestBody: json(CreateSourceRequest), responses: { '201': { description: 'source_id and ingest_endpoint', ...ok({}) }, ...withBody(404, 409) } },
        get: {
          security: bearer,
          parameters: [query('creator_id', { type: 'string' }), query('agent_id', { type: 'string' }), query('state', { type: 'string', enum: ['live', 'retired'] }), ...page(200)],
          responses: { '200': { description: "the caller's sources (the admin: every source), oldest first, with next_cursor", ...ok({ type: 'array' }) }, ...control(400) },
        },
      },
      '/v1/byo/sources/{source_id}': {
        get: { security: bearer, parameters: [path('source_id')], responses: { '200': { description: 'source, live or retired', ...ok({}) }, ...control(404) } },
        patch: {
          security: bearer,
          parameters: [path('source_id')],
          requestBody: json(UpdateSourceRequest),
          responses: { '200': { description: 'source with the manifest and/or listing replaced', ...ok({}) }, ...withBody(404, 409) },
        },
      },
      '/v1/byo/sources/{source_id}/retire': {
        post: { security: bearer, parameters: [path('source_id')], requestBody: noInput, responses: { '200': { description: 'retired source; its slot is free; repeating it changes nothing', ...ok({}) }, ...withBody(404) } },
      },
      '/v1/byo/sources/{source_id}/keys': {
        get: { security: bearer, parameters: [path('source_id')], responses: { '200': { description: 'keys', ...ok({ type: 'array' }) }, ...control(404) } },
        post: { security: bearer, parameters: [path('source_id')], requestBody: json(RegisterKeyRequest), responses: { '201': { description: 'pending key', ...ok({}) }, ...withBody(404, 409) } },
      },
      '/v1/byo/sources/{source_id}/keys/{key_id}/promote': { post: { security: bearer, parameters: [path('source_id'), path('key_id')], requestBody: noInput, responses: { '200': { description: 'active key', ...ok({}) }, ...withBody(404, 409) } } },
      '/v1/byo/sources/{source_id}/keys/{key_id}': { get: { security: bearer, parameters: [path('source_id'), path('key_id')], responses: { '200': { description: 'key', ...ok({}) }, ...control(404) } } },
      '/v1/byo/sources/{source_id}/keys/{key_id}/revoke': {
        post: {
          security: bearer,
          parameters: [path('source_id'), path('key_id')],
          requestBody: { required: false, ...json(RevokeKeyRequest) },
          responses: { '200': { description: 'revoked key, with revocation_reason', ...ok({}) }, ...withBody(404, 409) },
        },
      },
      '/v1/byo/sources/{source_id}/ingest-errors': {
        get: {
          security: bearer,
          parameters: [path('source_id'), { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }, { name: 'cursor', in: 'query', schema: { type: 'string' } }],
          responses: { '200': { description: 'refused requests, newest first, with next_cursor', ...ok({ type: 'array' }) }, ...control(400, 404) },
        },
      },
      '/v1/byo/sources/{source_id}/disputes': {
        get: { security: bearer, parameters: [path('source_id')], responses: { '200': { description: 'the source disputes, newest first (at most 64)', ...ok({ type: 'array' }) }, ...control(404) } },
        post: {
          security: bearer,
          parameters: [path('source_id')],
          requestBody: json(OpenDisputeRequest),
          responses: { '201': { description: 'open dispute; the key must be revoked', ...ok({}) }, ...withBody(404, 409, 503) },
        },
      },
      '/v1/byo/sources/{source_id}/disputes/{dispute_id}': {
        get: { security: bearer, parameters: [path('source_id'), path('dispute_id')], responses: { '200': { description: 'dispute', ...ok({}) }, ...control(404) } },
      },
      '/v1/byo/sources/{source_id}/signals/{signal_id}': {
        get: {
          security: bearer,
          parameters: [path('source_id'), path('signal_id')],
          responses: { '200': { description: 'the signal state (spec 3.2): accepted or disputed, with dispute_id', ...ok({}) }, ...control(404) },
        },
      },
      ...decision('accept', 'accepted dispute (admin token): its signals are disputed'),
      ...decision('reject', 'rejected dispute (admin token)'),
      '/v1/byo/agents/{agent_id}': { get: { security: bearer, parameters: [path('agent_id')], responses: { '200': { description: 'agent with slots_used and open_slots', ...ok({}) }, ...control(404) } } },
      '/v1/byo/agents/{agent_id}/sources': {
        get: {
          security: bearer,
          parameters: [path('agent_id'), { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }, { name: 'cursor', in: 'query', schema: { type: 'string' } }],
          responses: { '200': { description: 'the agent sources, oldest first, with next_cursor', ...ok({ type: 'array' }) }, ...control(400, 404) },
        },
      },
      '/v1/scoring/outcomes': {
        post: {
          security: bearer,
          description: `a scorer token (or the admin token); 1 to ${OUTCOMES_PER_POST_MAX} items, body at most ${OUTCOMES_BODY_MAX_BYTES} bytes; each refused item is named in the answer and the rest stored`,
          requestBody: { required: true, ...json({ type: 'array', minItems: 1, maxItems: OUTCOMES_PER_POST_MAX, items: OutcomeItem }) },
          responses: { '200': { description: 'items stored and items refused', ...ok(OutcomesAnswer) }, ...withBody() },
        },
      },
      '/v1/byo/sources/{source_id}/status': {
        get: {
          description: 'public metadata of a live source, with no token; a retired source only for its creator and the admin. An Authorization header must name a valid token (401 otherwise)',
          parameters: [path('source_id')],
          responses: { '200': { description: 'the source status', ...ok({ type: 'object' }) }, ...errors(401, 404, 503) },
        },
      },
      '/metrics': { get: { security: bearer, responses: { '200': { description: 'Prometheus text format (text/plain; version=0.0.4); the admin token or a metrics token' }, ...control(429) } } },
      '/v1/admin/rentals': {
        post: { security: bearer, requestBody: json(CreateRentalRequest), responses: { '201': { description: 'rental (admin token)', ...ok(RentalView) }, ...withBody(404, 409) } },
      },
      '/v1/rentals': {
        get: {
          security: bearer,
          parameters: [
            ...['renter_id', 'source_id'].map((name) => ({ name, in: 'query', schema: { type: 'string' } })),
            { name: 'state', in: 'query', schema: { enum: [...RENTAL_STATES] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } },
            { name: 'cursor', in: 'query', schema: { type: 'string' } },
          ],
          responses: { '200': { description: 'rentals, oldest first, with next_cursor: a renter token its own, the admin token all', ...ok({ type: 'array', items: RentalView }) }, ...control(400) },
        },
      },
      '/v1/rentals/{rental_id}': {
        get: { security: bearer, parameters: [path('rental_id')], responses: { '200': { description: 'rental: its renter or the admin token', ...ok(RentalView) }, ...control(404) } },
      },
      '/v1/admin/rentals/{rental_id}/end': {
        post: { security: bearer, parameters: [path('rental_id')], requestBody: noInput, responses: { '200': { description: 'ended rental; an ended or expired one unchanged', ...ok(RentalView) }, ...withBody(404) } },
      },
      '/healthz': { get: { responses: { '200': { description: 'alive' } } } },
      '/readyz': { get: { responses: { '200': { description: 'ready' }, ...errors(503) } } },
    },
  }
}
