import type { RefusalHistory } from '../../pipeline/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { badCursor, param, parseQuery } from '../http/query.js'
import { ownedSource } from './access.js'

export const INGEST_ERRORS_PAGE = { default: 50, max: 200 } as const

/** The creator's diagnostics of refused ingest requests: private to the source operator (and the admin). */
export function registerIngestErrorsRoute(parts: JsonRoutesParts, errors: RefusalHistory): void {
  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/ingest-errors', { access: 'creator' }, async ({ principal, params, query }) => {
    const { limit, cursor } = parseQuery(query, { limit: param.limit(INGEST_ERRORS_PAGE), cursor: param.cursor })
    const source = ownedSource(parts.registry, principal, params[0] as string)
    const page = await errors.page(source.source_id, limit, cursor)
    if (page === undefined) throw badCursor()
    return { status: 200, data: page.items, nextCursor: page.nextCursor }
  })
}
