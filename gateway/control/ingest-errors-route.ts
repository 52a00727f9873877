import type { RefusalHistory } from '../../pipeline/index.js'
import { ApiError } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { ownedSource, pageLimit } from './access.js'

export const INGEST_ERRORS_PAGE = { default: 50, max: 200 } as const

/** The creator's diagnostics of refused ingest requests: private to the source operator (and the admin). */
export function registerIngestErrorsRoute(parts: JsonRoutesParts, errors: RefusalHistory): void {
  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/ingest-errors', { access: 'creator' }, async ({ principal, params, query }) => {
    const source = ownedSource(parts.registry, principal, params[0] as string)
    const limit = pageLimit(query, INGEST_ERRORS_PAGE)
    const page = await errors.page(source.source_id, limit, query.get('cursor') ?? undefined)
    if (page === undefined) throw new ApiError('invalid_request', 'cursor is not one this endpoint returned')
    return { status: 200, data: page.items, nextCursor: page.nextCursor }
  })
}
