import type { Logger } from 'pino'
import type { Principal, Registry, SourceRecord } from '../../registry/index.js'
import type { ReceiptStore } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { requestPrincipal } from '../http/bearer.js'
import { getRoute, pathParameter, type JsonRoutesParts } from '../http/json-route.js'
import type { Reply } from '../http/reply.js'
import type { HttpRequest } from '../http/uws.js'
import { storeFailure } from './scoring-routes.js'
import { sourceStatusView, uptimeSpan } from './source-status.js'
import { StatusFigures } from './status-figures.js'

export interface SourceStatusOptions {
  readonly receipts: ReceiptStore
  /** How long a source's receipt figures are kept before ClickHouse is asked again. */
  readonly cacheMs: number
  readonly now: () => number
  readonly logger: Logger
}

/**
 * Who asks: nobody (no Authorization header), or the principal of a valid token. A header
 * that names no valid token is refused (401) as everywhere, rather than read as anonymous,
 * so a client with a mistyped or revoked token learns of it.
 */
function asker(registry: Registry, req: HttpRequest): { principal: Principal | undefined } | undefined {
  let headers = 0
  req.forEach((name) => {
    if (name === 'authorization') headers++
  })
  if (headers === 0) return { principal: undefined }
  const principal = requestPrincipal(registry, req)
  return principal === undefined ? undefined : { principal }
}

/**
 * A live source's status is public; a retired one's only for its creator and the admin,
 * and anyone else gets the 404 of a source that never existed.
 */
function visibleSource(registry: Registry, principal: Principal | undefined, sourceId: string): SourceRecord {
  const source = registry.anySource(sourceId)
  if (source === undefined) throw new ApiError('not_found', 'no such source')
  if (source.retired_at === null) return source
  if (principal !== undefined && (principal.role === 'admin' || (principal.role === 'creator' && principal.subject === source.creator_id))) return source
  throw new ApiError('not_found', 'no such source')
}

/**
 * `GET /v1/byo/sources/:source_id/status`: a source's public metadata, with or without a
 * token. Its own handler rather than a jsonRoute, which requires a token on every route.
 */
export function registerSourceStatusRoute(parts: JsonRoutesParts, options: SourceStatusOptions): void {
  const figures = new StatusFigures(options.receipts, options.cacheMs, options.now)
  getRoute(parts, '/v1/byo/sources/:source_id/status', (reply: Reply, req: HttpRequest) => {
    parts.track(reply)
    if (parts.isDraining()) return reply.fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }))
    const who = asker(parts.registry, req)
    if (who === undefined) return reply.fail(new ApiError('unauthorized', 'the Authorization header names no valid token (leave it out to read as the public)'))
    const sourceId = pathParameter(req.getParameter(0) ?? '')
    let source: SourceRecord
    try {
      source = visibleSource(parts.registry, who.principal, sourceId)
    } catch (err) {
      return reply.fail(err as ApiError)
    }
    const now = options.now()
    const span = uptimeSpan(source.created_at, now)
    Promise.resolve()
      .then(() => figures.get(source.source_id, span))
      .then(
        (stats) => {
          // Read after the wait: the registry's facts as they stand when the answer goes out.
          const current = parts.registry.anySource(source.source_id) ?? source
          const view = sourceStatusView(current, parts.registry.keysOf(source.source_id), parts.registry.disputesOf(source.source_id), stats, span)
          reply.send(200, { ok: true, data: view })
        },
        (err: unknown) => {
          const mapped = storeFailure(err)
          if (mapped instanceof ApiError) return reply.fail(mapped)
          options.logger.error({ request_id: reply.requestId, err }, 'source status failed')
          reply.fail(new ApiError('internal_error', 'internal error; retry later'))
        },
      )
  })
}
