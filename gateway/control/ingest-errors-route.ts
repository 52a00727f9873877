import type { IngestErrorLog } from '../../pipeline/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { badCursor, param, parseQuery } from '../http/query.js'
import { ownedSource } from './access.js'

export const INGEST_ERRORS_PAGE = { default: 50, max: 200 } as const

/** Spec 4.2 creator diagnostics: private to the source operator (and the admin). */
export function registerIngestErrorsRoute(parts: JsonRoutesParts, errors: IngestErrorLog): void {
  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/ingest-errors', { access: 'creator' }, ({ principal, params, query }) => {
    const { limit, cursor } = parseQuery(query, { limit: param.limit(INGEST_ERRORS_PAGE), cursor: param.cursor })
    const source = ownedSource(parts.registry, principal, params[0] as string)
    const page = errors.page(source.source_id, limit, cursor)
    if (page === undefined) throw badCursor()
    return { status: 200, data: page.items, nextCursor: page.nextCursor }
  })
}
