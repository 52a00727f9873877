import type { Rentals } from '../../rentals/index.js'
import { ApiError, parseDeliveryFilter } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { parseQuery } from '../http/query.js'
import { noBody, ownRental } from './access.js'
import { rentalAnswer } from './rental-answer.js'

/**
 * A rental's delivery filter, set, read and cleared by its renter. It is kept in the
 * rental's record (the rentals bucket), so every process applies it to the rental's
 * streams, polling and webhook from the moment the write is seen; an event already
 * waiting for its webhook retry is looked at again.
 */
export function registerFilterRoutes(parts: JsonRoutesParts, rentals: Rentals): void {
  const path = '/v1/rentals/:rental_id/filter'
  jsonRoute(parts, 'put', path, { access: 'renter' }, ({ principal, params, body }) =>
    rentalAnswer(async () => {
      const rental = ownRental(rentals, principal, params[0] as string)
      // The source's declared levels: a severity it never sends would filter out everything, silently.
      const levels = parts.registry.anySource(rental.source_id)?.manifest.severity_levels ?? []
      const parsed = parseDeliveryFilter(body ?? {}, levels)
      if (!parsed.ok) throw new ApiError('invalid_filter', parsed.problem)
      const updated = await rentals.setFilter(rental.rental_id, parsed.value)
      return { status: 200, data: { rental_id: rental.rental_id, filter: updated.filter ?? null } }
    }),
  )
  jsonRoute(parts, 'get', path, { access: 'renter' }, ({ principal, params, query }) => {
    parseQuery(query, {})
    const rental = ownRental(rentals, principal, params[0] as string)
    return { status: 200, data: { rental_id: rental.rental_id, filter: rental.filter ?? null } }
  })
  jsonRoute(parts, 'del', path, { access: 'renter' }, ({ principal, params, body }) =>
    rentalAnswer(async () => {
      noBody(body)
      const rental = ownRental(rentals, principal, params[0] as string)
      await rentals.setFilter(rental.rental_id, null)
      return { status: 200, data: { rental_id: rental.rental_id, filter: null } }
    }),
  )
}
