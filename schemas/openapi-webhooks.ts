import { DeliveryFilter } from './delivery-filter.js'
import { bearer, control, json, noInput, nullable, ok, path, time, withBody } from './openapi-parts.js'

/**
 * The webhook routes of the OpenAPI document: a rental's endpoint, its delivery log and
 * re-sends (a renter token, the rental's renter; every other role 403, another renter
 * the 404 of a missing rental), and the delivery keys. The limits are the ones
 * delivery/webhooks checks (URL 2,048 characters, 100 attempts and 200 dead letters
 * kept, 10,000 events waiting to be re-sent).
 */

const WebhookEndpoint = {
  type: 'object',
  properties: {
    rental_id: { type: 'string' },
    url: { type: 'string', maxLength: 2048 },
    start_seq: { type: 'integer', description: 'the first signal-log position this endpoint receives' },
    created_at: time,
    updated_at: time,
    state: { enum: ['enabled', 'disabled'] },
    disabled_reason: { enum: ['gone', 'failing', null] },
    disabled_at: nullable('string', { format: 'date-time' }),
    last_success_at: nullable('string', { format: 'date-time' }),
    failing_since: nullable('string', { format: 'date-time' }),
    retry_requests: { type: 'integer', description: 'retry requests so far (retry, re-sends, the URL set again): each ends the wait of the event being retried' },
    scheme: { enum: ['v1a', 'v1'], description: 'v1a: Ed25519 with the delivery keys; v1: HMAC-SHA256 with the webhook\'s secret' },
  },
}
const Health = {
  type: 'object',
  properties: {
    state: { enum: ['healthy', 'failing', 'disabled'] },
    since: nullable('string', { format: 'date-time', description: 'healthy: the last success (or the setting); failing: the first failure since; disabled: when' }),
    reason: { enum: ['gone', 'failing', null], description: 'disabled only: the receiver answered 410, or no success for WEBHOOK_DISABLE_AFTER_S' },
    last_error: { oneOf: [{ type: 'null' }, { type: 'object', properties: { result: { type: 'string' }, status: nullable('integer'), error: nullable('string'), attempted_at: time } }] },
  },
}
const WebhookView = { ...WebhookEndpoint, properties: { ...WebhookEndpoint.properties, health: Health } }
const WebhookSet = { ...WebhookEndpoint, properties: { ...WebhookEndpoint.properties, secret: { type: 'string', pattern: '^whsec_', description: 'scheme v1 only, in the answer that made it and never again' } } }
const FilterView = { type: 'object', properties: { rental_id: { type: 'string' }, filter: { oneOf: [{ type: 'null' }, DeliveryFilter] } } }
const RESULTS = ['delivered', 'http_status', 'redirect', 'gone', 'timeout', 'refused_address', 'connection']
/** The `error` of an attempt that got no HTTP answer (delivery/webhooks/webhook-worker.ts). */
const NO_ANSWER = ['unreachable', 'timeout', 'tls_error', 'refused_address']
const attemptError = nullable('string', { description: `why it failed: for no answer one of ${NO_ANSWER.join(', ')}; else the HTTP status the receiver answered (for lost events, how many). Never the socket error, address or port` })
const Attempt = {
  type: 'object',
  properties: {
    webhook_id: { type: 'string' },
    event_id: { type: 'string' },
    attempt: { type: 'integer', minimum: 0 },
    attempted_at: time,
    result: { enum: [...RESULTS, 'lost'] },
    status: nullable('integer'),
    error: attemptError,
    duration_ms: { type: 'integer' },
    next_attempt_at: nullable('string', { format: 'date-time' }),
  },
}
const DeadLetter = {
  type: 'object',
  properties: { webhook_id: { type: 'string' }, event_id: { type: 'string' }, seq: { type: 'integer' }, dead_at: time, attempts: { type: 'integer' }, last_error: nullable('string') },
}
const DeliveryKey = {
  type: 'object',
  properties: {
    key_id: { type: 'string' },
    public_key: { type: 'string', pattern: '^whpk_[A-Za-z0-9+/]{43}=$', description: 'whpk_ and the base64 of the raw 32-byte Ed25519 public key' },
    state: { enum: ['active', 'retiring'] },
    created_at: time,
    retires_at: nullable('string', { format: 'date-time' }),
  },
}
const oneString = (field: string, schema: Record<string, unknown>) => ({ required: true, ...json({ type: 'object', required: [field], additionalProperties: false, properties: { [field]: schema } }) })

const rental = path('rental_id')
const renterOnly = 'a renter token, the rental\u2019s renter; another renter gets 404 as for a missing rental, any other role 403'

export function webhookPaths(): Record<string, unknown> {
  return {
    '/v1/rentals/{rental_id}/webhook': {
      put: {
        security: bearer,
        description: `${renterOnly}. Sets or replaces the URL (https, public addresses only; 400 invalid_webhook_url says why not), enables a disabled endpoint and tries an event waiting for its retry at once. scheme v1 makes a new whsec_ secret, shown in this answer only; v1a (the default for a new webhook) signs with the delivery keys; without scheme the current one stays`,
        parameters: [rental],
        requestBody: { required: true, ...json({ type: 'object', required: ['url'], additionalProperties: false, properties: { url: { type: 'string', maxLength: 2048 }, scheme: { enum: ['v1a', 'v1'] } } }) },
        responses: { '200': { description: 'the endpoint, and its secret once for scheme v1', ...ok(WebhookSet) }, ...withBody(404, 409) },
      },
      get: { security: bearer, description: renterOnly, parameters: [rental], responses: { '200': { description: 'the endpoint and its health; 404 when the rental has none', ...ok(WebhookView) }, ...control(404) } },
      delete: {
        security: bearer,
        description: `${renterOnly}. Stops deliveries and removes the endpoint and its delivery log`,
        parameters: [rental],
        requestBody: noInput,
        responses: { '200': { description: '{rental_id, deleted: true}', ...ok({ type: 'object' }) }, ...withBody(404) },
      },
    },
    '/v1/rentals/{rental_id}/webhook/test': {
      post: {
        security: bearer,
        description: `${renterOnly}. Sends a signed byo.webhook.test event now; 409 rental_not_active once the rental ended or expired; 429 rate_limited with Retry-After past WEBHOOK_TESTS_PER_MINUTE (10) a minute per rental`,
        parameters: [rental],
        requestBody: noInput,
        responses: { '200': { description: 'what the endpoint answered', ...ok({ type: 'object', properties: { webhook_id: { type: 'string' }, result: { enum: RESULTS }, status: nullable('integer'), error: attemptError, duration_ms: { type: 'integer' } } }) }, ...withBody(404, 409, 429) },
      },
    },
    '/v1/rentals/{rental_id}/webhook/retry': {
      post: {
        security: bearer,
        description: `${renterOnly}. Tries the event waiting for its retry now, in whichever process delivers the rental's webhook; enables a disabled endpoint`,
        parameters: [rental],
        requestBody: noInput,
        responses: { '200': { description: '{rental_id, state, retrying: {event_id, attempts} or null when none waits}', ...ok({ type: 'object' }) }, ...withBody(404) },
      },
    },
    '/v1/rentals/{rental_id}/filter': {
      put: {
        security: bearer,
        description: `${renterOnly}. Sets the rental's delivery filter, applied to its streams, polling and webhook from now on (an event waiting for its retry included; a re-send of one named event is delivered whatever the filter). 400 invalid_filter says what is wrong`,
        parameters: [rental],
        requestBody: { required: true, ...json(DeliveryFilter) },
        responses: { '200': { description: 'the filter as stored (tokens in canonical form)', ...ok(FilterView) }, ...withBody(400, 404) },
      },
      get: { security: bearer, description: renterOnly, parameters: [rental], responses: { '200': { description: 'the filter, null when none', ...ok(FilterView) }, ...control(404) } },
      delete: { security: bearer, description: `${renterOnly}. Clears the filter: every signal is delivered again`, parameters: [rental], requestBody: noInput, responses: { '200': { description: '{rental_id, filter: null}', ...ok(FilterView) }, ...withBody(404) } },
    },
    '/v1/rentals/{rental_id}/webhook/deliveries': {
      get: {
        security: bearer,
        description: renterOnly,
        parameters: [rental],
        responses: { '200': { description: 'the last 100 attempts and the last 200 dead letters, newest first', ...ok({ type: 'object', properties: { attempts: { type: 'array', items: Attempt }, dead_letters: { type: 'array', items: DeadLetter } } }) }, ...control(404) },
      },
    },
    '/v1/rentals/{rental_id}/webhook/deliveries/{event_id}/resend': {
      post: {
        security: bearer,
        description: `${renterOnly}. Sends one event again, with its webhook-id, whatever the rental's filter; 404 if the rental never received it or the log no longer holds it; 409 limit_exceeded past 10,000 events waiting`,
        parameters: [rental, path('event_id')],
        requestBody: noInput,
        responses: { '200': { description: '{event_id, queued: 1}', ...ok({ type: 'object' }) }, ...withBody(404, 409) },
      },
    },
    '/v1/rentals/{rental_id}/webhook/resend': {
      post: {
        security: bearer,
        description: `${renterOnly}. Sends again every event of the rental received at or after since that its filter lets through now; 409 limit_exceeded past 10,000 events`,
        parameters: [rental],
        requestBody: oneString('since', { type: 'string', format: 'date-time' }),
        responses: { '200': { description: '{queued: n}', ...ok({ type: 'object', properties: { queued: { type: 'integer' } } }) }, ...withBody(404, 409) },
      },
    },
    '/v1/delivery-keys': {
      get: { description: 'public, no token: the keys webhook deliveries are signed with', responses: { '200': { description: 'the signing keys, oldest first', ...ok({ type: 'array', items: DeliveryKey }) } } },
    },
    '/v1/admin/delivery-keys/rotate': {
      post: {
        security: bearer,
        description: 'admin token: a new active key; the one it replaces signs next to it until DELIVERY_KEY_OVERLAP_S has passed',
        requestBody: noInput,
        responses: { '200': { description: 'the signing keys, as GET /v1/delivery-keys answers them', ...ok({ type: 'array', items: DeliveryKey }) }, ...withBody() },
      },
    },
  }
}
