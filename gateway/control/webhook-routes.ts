import { DeliveryKeyLimitError, WebhookRequestError, WebhookUrlError, type Webhooks } from '../../delivery/index.js'
import { parseIsoUtc } from '../../pipeline/index.js'
import type { Principal } from '../../registry/index.js'
import type { RentalRecord, Rentals } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'
import { isKvError } from '../../storage/index.js'
import { getRoute, jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { parseQuery } from '../http/query.js'
import { noBody } from './access.js'

/**
 * The rental if `principal` (a renter: the routes let no other role in) is its renter;
 * another renter gets the 404 of a missing one. Roles that can never hold a rental
 * (admin, creator, metrics, scorer) are refused 403 by the route's access, like the
 * rental routes refuse every role but renter and admin: that tells them nothing about a rental.
 */
function ownRental(rentals: Rentals, principal: Principal, rentalId: string): RentalRecord {
  const rental = rentals.get(rentalId)
  if (rental === undefined || principal.role !== 'renter' || rental.renter_id !== principal.subject) throw new ApiError('not_found', 'no such rental')
  return rental
}

/** A closed one-field body: `{ "<field>": "<string>" }`. */
function oneString(body: unknown, field: string): string {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiError('invalid_request', `the body must be {"${field}": "..."}`)
  const extra = Object.keys(body).find((k) => k !== field)
  if (extra !== undefined) throw new ApiError('invalid_request', `unknown field ${JSON.stringify(extra).slice(0, 80)}; the body takes ${field} only`)
  const value = (body as Record<string, unknown>)[field]
  if (typeof value !== 'string') throw new ApiError('invalid_request', `${field} must be a string`)
  return value
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
  jsonRoute(parts, 'put', base, { access: 'renter' }, ({ principal, params, body }) =>
    answer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      return { status: 200, data: await webhooks.set(rental, oneString(body, 'url')) }
    }),
  )
  jsonRoute(parts, 'get', base, { access: 'renter' }, ({ principal, params }) =>
    answer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      const endpoint = await webhooks.get(rental.rental_id)
      if (endpoint === null) throw new ApiError('not_found', 'this rental has no webhook')
      return { status: 200, data: endpoint }
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
