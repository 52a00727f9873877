import { DeliveryKeyLimitError, WEBHOOK_SCHEMES, WebhookRequestError, WebhookUrlError, type Webhooks, type WebhookScheme } from '../../delivery/index.js'
import { parseIsoUtc } from '../../pipeline/index.js'
import type { Rentals } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'
import { isKvError } from '../../storage/index.js'
import { getRoute, jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { parseQuery } from '../http/query.js'
import { noBody, ownRental } from './access.js'

/** A closed one-field body: `{ "<field>": "<string>" }`. */
function oneString(body: unknown, field: string): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError('invalid_request', `the body must be {"${field}": "..."}`)
  const extra = Object.keys(body).find((k) => k !== field)
  if (extra !== undefined) throw new ApiError('invalid_request', `unknown field ${JSON.stringify(extra).slice(0, 80)}; the body takes ${field} only`)
  const value = (body as Record<string, unknown>)[field]
  if (typeof value !== 'string') throw new ApiError('invalid_request', `${field} must be a string`)
  return value
}

/** `{ "url": "...", "scheme": "v1a" | "v1" }`, scheme optional (the webhook's current one, v1a for a new webhook). */
function webhookBody(body: unknown): { url: string; scheme: WebhookScheme | undefined } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError('invalid_request', 'the body must be {"url": "...", "scheme": "v1a" | "v1"}')
  const doc = body as Record<string, unknown>
  const extra = Object.keys(doc).find((k) => k !== 'url' && k !== 'scheme')
  if (extra !== undefined) throw new ApiError('invalid_request', `unknown field ${JSON.stringify(extra).slice(0, 80)}; the body takes url and scheme`)
  const { scheme, ...rest } = doc
  const url = oneString(rest, 'url')
  if (scheme !== undefined && !WEBHOOK_SCHEMES.includes(scheme as WebhookScheme)) throw new ApiError('invalid_request', 'scheme must be "v1a" (Ed25519 with the delivery keys) or "v1" (HMAC-SHA256 with a secret of the webhook)')
  return { url, scheme: scheme as WebhookScheme | undefined }
}

async function answer<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    if (err instanceof WebhookUrlError) throw new ApiError('invalid_webhook_url', err.message, { cause: err })
    if (err instanceof WebhookRequestError || err instanceof DeliveryKeyLimitError) throw new ApiError(err.code, err.message, { cause: err, ...(err instanceof WebhookRequestError && err.retryAfterS !== undefined && { retryAfter: err.retryAfterS }) })
    if (isKvError(err, 'bucket_full')) throw new ApiError('limit_exceeded', 'the webhook store is full', { cause: err })
    if (isKvError(err) && err.transient) throw new ApiError('overloaded', 'the webhook store is unavailable for a moment; retry', { retryAfter: 1, cause: err })
    throw err
  }
}

/**
 * A rental's webhook, set and read by its renter; the delivery log, re-sends and the test
 * request; the service's delivery keys (public) and their rotation (admin).
 */
export function registerWebhookRoutes(parts: JsonRoutesParts, rentals: Rentals, webhooks: Webhooks): void {
  const base = '/v1/rentals/:rental_id/webhook'
  // The answer carries a v1 secret once, when this request made it.
  jsonRoute(parts, 'put', base, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      const { url, scheme } = webhookBody(body)
      return { status: 200, data: await webhooks.set(rental, url, scheme) }
    }),
  )
  jsonRoute(parts, 'get', base, { access: 'renter' }, ({ principal, params }) =>
    answer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      const endpoint = await webhooks.view(rental.rental_id)
      if (endpoint === null) throw new ApiError('not_found', 'this rental has no webhook')
      return { status: 200, data: endpoint }
    }),
  )
  jsonRoute(parts, 'post', `${base}/retry`, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      noBody(body)
      const rental = ownRental(rentals, principal, params[0] as string)
      const { endpoint, pending } = await webhooks.retry(rental)
      return { status: 200, data: { rental_id: rental.rental_id, state: endpoint.state, retrying: pending } }
    }),
  )
  jsonRoute(parts, 'del', base, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      noBody(body)
      const rental = ownRental(rentals, principal, params[0] as string)
      if (!(await webhooks.remove(rental.rental_id))) throw new ApiError('not_found', 'this rental has no webhook')
      return { status: 200, data: { rental_id: rental.rental_id, deleted: true } }
    }),
  )
  jsonRoute(parts, 'post', `${base}/test`, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      noBody(body)
      const rental = ownRental(rentals, principal, params[0] as string)
      const outcome = await webhooks.test(rental)
      return { status: 200, data: { webhook_id: outcome.webhook_id, result: outcome.result, status: outcome.status, error: outcome.error, duration_ms: outcome.durationMs } }
    }),
  )
  jsonRoute(parts, 'get', `${base}/deliveries`, { access: 'renter' }, ({ principal, params, query }) =>
    answer(async () => {
      parseQuery(query, {})
      const rental = ownRental(rentals, principal, params[0] as string)
      return { status: 200, data: await webhooks.deliveries(rental.rental_id) }
    }),
  )
  jsonRoute(parts, 'post', `${base}/deliveries/:event_id/resend`, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      noBody(body)
      const rental = ownRental(rentals, principal, params[0] as string)
      await webhooks.resend(rental, params[1] as string)
      return { status: 200, data: { event_id: params[1], queued: 1 } }
    }),
  )
  jsonRoute(parts, 'post', `${base}/resend`, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      const since = parseIsoUtc(oneString(body, 'since'))
      if (since === undefined) throw new ApiError('invalid_request', 'since must be an ISO 8601 UTC time, such as 2030-01-31T12:00:00Z')
      return { status: 200, data: { queued: await webhooks.resendSince(rental, since) } }
    }),
  )
  // Public: anyone verifying a delivery needs them, and they are public keys.
  getRoute(parts, '/v1/delivery-keys', (reply) => reply.send(200, { ok: true, data: webhooks.deliveryKeys() }))
  jsonRoute(parts, 'post', '/v1/admin/delivery-keys/rotate', { access: 'admin' }, ({ body }) =>
    answer(async () => {
      noBody(body)
      return { status: 200, data: await webhooks.rotateDeliveryKeys() }
    }),
  )
}
