import type { Logger } from 'pino'
import { ApiError } from '../schemas/index.js'
import { requestPrincipal } from './http/bearer.js'
import { getRoute, type JsonRoutesParts } from './http/json-route.js'
import type { Metrics } from './metrics.js'

/**
 * Pages built per second, whoever asks. A page costs the event loop about a millisecond
 * (every metric is read, the process ones from /proc), so a leaked scrape token looping
 * on /metrics could otherwise take the loop from ingest; Prometheus scrapes each target
 * every few seconds, a handful of replicas at most.
 */
export const METRICS_PAGES_PER_SECOND = 20

/**
 * `GET /metrics`: the admin token or a metrics token (what a Prometheus scraper holds).
 * Creator and renter tokens get 403, as on the admin routes.
 */
export function registerMetricsRoute(parts: JsonRoutesParts, metrics: Metrics, logger: Logger, now: () => number): void {
  let windowStart = Number.NEGATIVE_INFINITY
  let pagesInWindow = 0
  getRoute(parts, '/metrics', (reply, req) => {
    const principal = requestPrincipal(parts.registry, req)
    if (principal === undefined) return reply.fail(new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header is required'))
    if (principal.role !== 'admin' && principal.role !== 'metrics') return reply.fail(new ApiError('forbidden', 'this endpoint needs the admin token or a metrics token'))
    const at = now()
    if (at - windowStart >= 1000) {
      windowStart = at
      pagesInWindow = 0
    }
    if (pagesInWindow >= METRICS_PAGES_PER_SECOND) {
      return reply.fail(new ApiError('rate_limited', `at most ${METRICS_PAGES_PER_SECOND} metrics pages a second`, { retryAfter: 1 }))
    }
    pagesInWindow++
    metrics.exposition().then(
      (page) => reply.sendText(200, metrics.contentType, page),
      (err: unknown) => {
        logger.error({ request_id: reply.requestId, err }, 'metrics scrape failed')
        reply.fail(new ApiError('internal_error', 'internal error; retry later'))
      },
    )
  })
}
