import { parseIsoUtc } from '../../pipeline/index.js'
import type { Principal } from '../../registry/index.js'
import { type RentalFilter, type RentalRecord, type Rentals } from '../../rentals/index.js'
import { ApiError, checkCreateRental, RENTAL_STATES } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { noBody, parseBody } from './access.js'
import { rentalAnswer } from './rental-answer.js'
import { pageAfter } from './paging.js'

export const RENTALS_PAGE = { default: 50, max: 200 } as const
/** How far in the past a starts_at may lie: the caller's clock and the gateway's differ a little. */
export const STARTS_AT_SLACK_MS = 5 * 60_000

const LIST_QUERY = {
  renter_id: param.clientId,
  source_id: param.sourceId,
  state: param.oneOf(RENTAL_STATES),
  limit: param.limit(RENTALS_PAGE),
  cursor: param.cursor,
}

/**
 * Who may read a rental: its renter and the admin. A creator is not told who rents its
 * sources (the renters are the operator's customers, and a rental gives no ownership of
 * the source either way), and another renter gets the 404 of a rental that does not exist.
 */
function readable(principal: Principal, rental: RentalRecord | undefined): rental is RentalRecord {
  return rental !== undefined && (principal.role === 'admin' || (principal.role === 'renter' && rental.renter_id === principal.subject))
}

/** Let in by name: a creator (no ownership through rentals), a metrics token and any role added later are refused. */
function refuseCreators(principal: Principal): void {
  if (principal.role !== 'renter' && principal.role !== 'admin') throw new ApiError('forbidden', 'rentals are read by their renter and the admin')
}

/** A time field of the body: ISO 8601 UTC, as parseIsoUtc reads it. */
function time(field: string, value: string): number {
  const ms = parseIsoUtc(value)
  if (ms === undefined) throw new ApiError('invalid_request', `${field} must be an ISO 8601 UTC time, such as 2030-01-31T12:00:00Z`)
  return ms
}

/**
 * Rentals: made and ended by the operator (the admin token), read by their renter. A
 * rental gives its renter the signals of the source; it never gives the source itself.
 */
export function registerRentalRoutes(parts: JsonRoutesParts, rentals: Rentals, now: () => number = Date.now): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/admin/rentals', { access: 'admin' }, ({ body }) =>
    rentalAnswer(async () => {
      const input = parseBody(checkCreateRental, body)
      const at = now()
      const startsAt = input.starts_at === undefined ? at : time('starts_at', input.starts_at)
      if (startsAt < at - STARTS_AT_SLACK_MS) throw new ApiError('invalid_request', 'starts_at must not be more than 5 minutes in the past')
      const expiresAt = input.expires_at === undefined || input.expires_at === null ? null : time('expires_at', input.expires_at)
      if (expiresAt !== null && expiresAt <= at) throw new ApiError('invalid_request', 'expires_at must be in the future')
      if (expiresAt !== null && expiresAt <= startsAt) throw new ApiError('invalid_request', 'expires_at must be after starts_at')
      const source = registry.source(input.source_id)
      if (source === undefined) throw new ApiError('not_found', 'no such source')
      const rental = await rentals.create({ renter_id: input.renter_id, source_id: source.source_id, creator_id: source.creator_id, starts_at: input.starts_at === undefined ? undefined : startsAt, expires_at: expiresAt })
      return { status: 201, data: rental }
    }),
  )

  // Oldest first. A renter lists its own rentals (a renter_id naming another lists none); the admin lists all.
  jsonRoute(parts, 'get', '/v1/rentals', { access: 'any' }, ({ principal, query }) => {
    refuseCreators(principal)
    const { renter_id: renterId, source_id: sourceId, state, limit, cursor } = parseQuery(query, LIST_QUERY)
    if (principal.role === 'renter' && renterId !== undefined && renterId !== principal.subject) return { status: 200, data: [], nextCursor: null }
    const filter: RentalFilter = { ...(renterId !== undefined && { renter_id: renterId }), ...(sourceId !== undefined && { source_id: sourceId }) }
    const scope = principal.role === 'renter' ? { ...filter, renter_id: principal.subject } : filter
    const at = now()
    const keep = state === undefined ? undefined : (r: RentalRecord) => rentals.isIn(r, state, at)
    // Timed: a rental deleted past its keeping time must not make a cursor naming it fail.
    const page = pageAfter(rentals.candidates(scope), (r) => r.rental_id, cursor, limit, keep, (r) => Date.parse(r.created_at))
    return { status: 200, data: page.items.map((r) => rentals.view(r, at)), nextCursor: page.nextCursor }
  })

  jsonRoute(parts, 'get', '/v1/rentals/:rental_id', { access: 'any' }, ({ principal, params }) => {
    refuseCreators(principal)
    const rental = rentals.get(params[0] as string)
    if (!readable(principal, rental)) throw new ApiError('not_found', 'no such rental')
    return { status: 200, data: rental }
  })

  // Ending an ended or expired rental answers 200 with it unchanged: a retried request gets the same answer.
  jsonRoute(parts, 'post', '/v1/admin/rentals/:rental_id/end', { access: 'admin' }, ({ params, body }) =>
    rentalAnswer(async () => {
      noBody(body)
      return { status: 200, data: await rentals.end(params[0] as string) }
    }),
  )
}
