import { ErrorBody } from './api-error.js'
import {
  ClientId,
  CreateAgentRequest,
  Cursor,
  CreateSourceRequest,
  CreateTokenRequest,
  OpenDisputeRequest,
  RegisterKeyRequest,
  ResolveDisputeRequest,
  RevokeKeyRequest,
  SourceId,
  UpdateAgentRequest,
  UpdateSourceRequest,
} from './control.js'
import { SignalAcceptedEvent } from './events.js'
import { Listing, Manifest } from './manifest.js'
import { CreateRentalRequest, RENTAL_STATES, RentalView } from './rentals.js'
import { OUTCOMES_BODY_MAX_BYTES, OUTCOMES_PER_POST_MAX, OutcomeItem, OutcomesAnswer } from './scoring.js'
import { AcceptedBody, SignalPayloadSchema } from './signal.js'
import { bearer, control, errors, json, noInput, nullable, ok, path, time, withBody } from './openapi-parts.js'
import { webhookPaths } from './openapi-webhooks.js'
import { logPaths } from './openapi-log.js'
import { statsPaths } from './openapi-stats.js'
import { streamPaths, streamSchemas, ticketScheme } from './openapi-streams.js'

const query = (name: string, schema: object) => ({ name, in: 'query', schema })
const page = (max: number) => [query('limit', { type: 'integer', minimum: 1, maximum: max }), query('cursor', Cursor)]
const header = (name: string, description: string, required = true) => ({ name, in: 'header', required, description, schema: { type: 'string' } })

/**
 * Receipt reads let the public in: no Authorization header reads the public view of a
 * source that lists its receipts; a header must hold a valid token (401 otherwise).
 */
const bearerOrPublic = [{}, { bearer: [] }]
/** A receipt as a full reader sees it; the public view leaves out signal_id, key_id, note, recorded_at and test. */
const Receipt = {
  type: 'object',
  required: ['receipt_id', 'source_id', 'agent_id', 'token', 'severity', 'confidence', 'emitted_at', 'received_at', 'window_start', 'window_end', 'baseline', 'outcome', 'dispute_status'],
  properties: {
    receipt_id: { type: 'string', pattern: '^rc_[0-9a-f]{32}$' },
    source_id: { type: 'string' },
    agent_id: { type: 'string' },
    signal_id: { type: 'string' },
    key_id: { type: 'string' },
    token: { type: 'string' },
    severity: { type: 'string' },
    confidence: nullable('integer', { minimum: 0, maximum: 100 }),
    note: nullable('string'),
    emitted_at: time,
    received_at: time,
    recorded_at: time,
    window_start: nullable('string', { format: 'date-time' }),
    window_end: nullable('string', { format: 'date-time' }),
    baseline: nullable('number'),
    outcome: { enum: ['pending', 'hit', 'miss', 'void'] },
    dispute_status: { enum: ['none', 'open', 'disputed', 'rejected'] },
    test: { type: 'boolean' },
  },
}
/** The filters of receipt lists and exports; `cross` adds those of the endpoints across sources. */
const receiptFilters = (cross: boolean) => [
  query('from', { type: 'string', format: 'date-time', description: 'emitted_at at or after' }),
  query('to', { type: 'string', format: 'date-time', description: 'emitted_at before; after from' }),
  query('outcome', { enum: ['pending', 'hit', 'miss', 'void'] }),
  query('severity', { type: 'string', pattern: '^[A-Za-z0-9_-]{1,32}$' }),
  query('token', { type: 'string', pattern: '^[A-Za-z0-9]{1,128}$' }),
  query('status', { enum: ['none', 'open', 'disputed', 'rejected'], description: 'the dispute status' }),
  query('signal_id', { type: 'string', pattern: '^[A-Za-z0-9_:-]{8,128}$', description: "the creator's signal id; full view only (400 invalid_request in the public view, which hides signal ids)" }),
  ...(cross ? [query('source_id', SourceId), query('agent_id', ClientId)] : []),
]
const receiptList = (cross: boolean, description: string) => ({
  get: {
    security: bearerOrPublic,
    description,
    parameters: [
      ...receiptFilters(cross),
      query('include_test', { enum: ['true', 'false'], description: "test receipts too: the source's creator and the admin only" }),
      ...page(1000),
    ],
    responses: { '200': { description: 'receipts, newest first (emitted_at, then receipt_id, descending), with next_cursor (null on the last page)', ...json({ type: 'object', properties: { ok: { const: true }, data: { type: 'array', items: Receipt }, next_cursor: nullable('string') } }) }, ...control(400, 404, 429) },
  },
})
const EXPORT_TYPES = { 'application/x-ndjson': {}, 'text/csv': {}, 'application/vnd.apache.parquet': {} }
const receiptExport = (cross: boolean, description: string) => ({
  get: {
    security: bearer,
    description,
    parameters: [
      ...receiptFilters(cross),
      query('include_test', { enum: ['false'], description: 'test receipts are never exported: true is refused' }),
      query('format', { enum: ['ndjson', 'csv', 'parquet'], default: 'ndjson' }),
    ],
    responses: { '200': { description: 'every matching receipt, test receipts never, streamed as an attachment (chunked)', content: EXPORT_TYPES }, ...control(400, 404, 429) },
  },
})
const Usage = {
  type: 'object',
  properties: {
    role: { type: 'string' },
    subject: { type: 'string' },
    month: { type: 'string', pattern: '^\\d{4}-\\d{2}$' },
    rows_exported: { type: 'integer' },
    days: { type: 'array', items: { type: 'object', properties: { day: { type: 'string', format: 'date' }, rows_exported: { type: 'integer' } } } },
  },
}
const month = query('month', { type: 'string', pattern: '^\\d{4}-(0[1-9]|1[0-2])$', description: 'YYYY-MM, UTC; default the current month' })

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
    info: { title: 'Signal Ingest Gateway', version: '1', description: 'Signed ingest, the control plane, receipt reads and delivery.' },
    servers: [{ url: serverUrl }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' }, ticket: ticketScheme },
      schemas: { ErrorBody, SignalPayload: SignalPayloadSchema, AcceptedBody, Manifest, Listing, SignalAcceptedEvent, ...streamSchemas },
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
            { name: 'subject', in: 'query', schema: ClientId },
            { name: 'state', in: 'query', schema: { type: 'string', enum: ['live', 'revoked'] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000 } },
            { name: 'cursor', in: 'query', schema: Cursor },
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
          parameters: [query('creator_id', ClientId), ...page(1000)],
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
          parameters: [query('creator_id', ClientId), query('agent_id', ClientId), query('state', { type: 'string', enum: ['live', 'retired'] }), ...page(200)],
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
          parameters: [path('source_id'), { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }, { name: 'cursor', in: 'query', schema: Cursor }],
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
          responses: { '200': { description: 'the signal state: accepted, or disputed (with dispute_id) once compromise evidence is accepted', ...ok({}) }, ...control(404) },
        },
      },
      ...decision('accept', 'accepted dispute (admin token): its signals are disputed'),
      ...decision('reject', 'rejected dispute (admin token)'),
      '/v1/byo/agents/{agent_id}': { get: { security: bearer, parameters: [path('agent_id')], responses: { '200': { description: 'agent with slots_used and open_slots', ...ok({}) }, ...control(404) } } },
      '/v1/byo/agents/{agent_id}/sources': {
        get: {
          security: bearer,
          parameters: [path('agent_id'), { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } }, { name: 'cursor', in: 'query', schema: Cursor }],
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
      ...statsPaths(),
      '/metrics': { get: { security: bearer, responses: { '200': { description: 'Prometheus text format (text/plain; version=0.0.4); the admin token or a metrics token' }, ...control(429) } } },
      '/v1/admin/rentals': {
        post: { security: bearer, requestBody: json(CreateRentalRequest), responses: { '201': { description: 'rental (admin token)', ...ok(RentalView) }, ...withBody(404, 409) } },
      },
      '/v1/rentals': {
        get: {
          security: bearer,
          parameters: [
            { name: 'renter_id', in: 'query', schema: ClientId },
            { name: 'source_id', in: 'query', schema: SourceId },
            { name: 'state', in: 'query', schema: { enum: [...RENTAL_STATES] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 200 } },
            { name: 'cursor', in: 'query', schema: Cursor },
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
      ...webhookPaths(),
      ...streamPaths(),
      '/v1/byo/sources/{source_id}/receipts': receiptList(false, "one source's receipts: its creator and the admin in full, a renter with an active rental of it in full, anyone else the delayed, redacted public view if the listing has public_receipts; otherwise 404"),
      '/v1/byo/sources/{source_id}/receipts/export': receiptExport(false, "every matching receipt of one source as NDJSON, CSV or Parquet: its creator, a renter with an active rental of it, the admin"),
      '/v1/byo/receipts': receiptList(true, 'receipts across the sources the caller reads in full; without a token, source_id is required and the answer is its public view'),
      '/v1/byo/receipts/export': receiptExport(true, 'every matching receipt across the sources the caller reads in full, as NDJSON, CSV or Parquet'),
      '/v1/byo/receipts/{receipt_id}': {
        get: {
          security: bearerOrPublic,
          parameters: [path('receipt_id')],
          responses: { '200': { description: 'one receipt, as the caller may see it (the public view redacted and only past the delay)', ...ok(Receipt) }, ...control(404, 429) },
        },
      },
      ...logPaths(),
      '/v1/usage': {
        get: { security: bearer, parameters: [month], responses: { '200': { description: "the caller's metered use (rows exported) in one UTC month, by day: a creator, renter or admin token", ...ok(Usage) }, ...control(400) } },
      },
      '/v1/admin/usage': {
        get: {
          security: bearer,
          parameters: [query('principal', { type: 'string', description: 'role:subject, the role admin, creator or renter' }), month],
          responses: { '200': { description: "anyone's metered use in one UTC month (admin token)", ...ok(Usage) }, ...control(400) },
        },
      },
      '/healthz': { get: { responses: { '200': { description: 'alive' } } } },
      '/readyz': { get: { responses: { '200': { description: 'ready: status, verify_queue and the recorder (state, lag_records, lag_seconds, disputes_pending, last_error while retrying); stays 200 however far the recorder lags' }, ...errors(503) } } },
    },
  }
}
