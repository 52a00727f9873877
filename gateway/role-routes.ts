import type { Role } from '../config/index.js'
import type { Webhooks } from '../delivery/index.js'
import { ApiError } from '../schemas/index.js'
import { registerFilterRoutes } from './control/filter-routes.js'
import { registerWebhookRoutes } from './control/webhook-routes.js'
import { RECEIPT_PATHS } from './receipt-routes.js'
import type { JsonRoutesParts } from './http/json-route.js'
import { route } from './http/route.js'
import type { MillisecondsHistogram } from './metrics-histogram.js'
import type { Metrics } from './metrics.js'
import { registerPollRoute, registerStreamMetrics, registerStreamRoutes, type PollRouteOptions, type StreamRouteOptions } from './streams/index.js'
import { registerWebhookMetrics } from './webhook-metrics.js'

/**
 * Every path the delivery role serves. A process without that role answers them with
 * `421 wrong_role` naming the role that does, so a load balancer routing by path (or an
 * operator reading the answer) sees a misrouted request at once, distinct from a 404 of a
 * rental or a path that does not exist, and a 4xx that no passive health check counts
 * against the process. `registerDeliveryRoutes` refuses to start if the routes it
 * registers and this list ever differ.
 */
export const DELIVERY_PATHS: readonly string[] = [
  '/v1/rentals/:rental_id/stream-tickets',
  '/v1/rentals/:rental_id/events',
  '/v1/rentals/:rental_id/signals',
  '/v1/rentals/:rental_id/webhook',
  '/v1/rentals/:rental_id/webhook/test',
  '/v1/rentals/:rental_id/webhook/deliveries',
  '/v1/rentals/:rental_id/webhook/deliveries/:event_id/resend',
  '/v1/rentals/:rental_id/webhook/resend',
  '/v1/rentals/:rental_id/webhook/retry',
  '/v1/rentals/:rental_id/filter',
  '/v1/delivery-keys',
  '/v1/admin/delivery-keys/rotate',
]

/** What the delivery role serves: the renters' event streams, stream tickets, polling and webhooks. */
export interface DeliveryRouteOptions {
  readonly streams: StreamRouteOptions & Pick<PollRouteOptions, 'log' | 'endSettleMs'>
  readonly webhooks: Webhooks
  /** The delivery latency histograms the delivery part feeds, shown in /metrics. */
  readonly latency: readonly MillisecondsHistogram[]
}

/** Registers the delivery routes and their metrics; returns what ends the open streams, for the drain. */
export function registerDeliveryRoutes(parts: JsonRoutesParts, o: DeliveryRouteOptions, metrics: Metrics): { closeAll: () => void; stop: () => void } {
  const before = new Set(parts.routes.keys())
  const streams = registerStreamRoutes(parts, o.streams)
  registerPollRoute(parts, o.streams)
  registerWebhookRoutes(parts, o.streams.rentals, o.webhooks)
  registerFilterRoutes(parts, o.streams.rentals)
  registerStreamMetrics(metrics.registry, o.streams.hub)
  registerWebhookMetrics(metrics.registry, o.webhooks)
  for (const histogram of o.latency) metrics.registry.registerMetric(histogram.asMetric())
  const added = [...parts.routes.keys()].filter((p) => !before.has(p))
  const unlisted = added.filter((p) => !DELIVERY_PATHS.includes(p))
  const missing = DELIVERY_PATHS.filter((p) => !added.includes(p))
  // A delivery route left out of the list would get a 404 instead of a 421 on the other roles.
  if (unlisted.length > 0 || missing.length > 0) throw new Error(`DELIVERY_PATHS is out of date: not listed ${JSON.stringify(unlisted)}, not served ${JSON.stringify(missing)}`)
  return streams
}

const SERVED_BY = { gateway: 'ROLE=gateway', delivery: 'ROLE=delivery', recorder: 'ROLE=recorder' } as const

/**
 * The `421 wrong_role` answers of a process that runs less than every role: the delivery
 * paths where delivery does not run, and every other `/v1/` path (ingest, the control
 * plane, reads) where the gateway role does not run. The health, readiness, metrics and
 * OpenAPI paths are served by every role and registered before this.
 */
export function registerOtherRoles(parts: JsonRoutesParts, role: Role, receipts: { readonly receiptsHere: boolean; readonly receiptsServedBy: 'gateway' | 'recorder' }): void {
  const misdirected = (servedBy: keyof typeof SERVED_BY) => (reply: Parameters<Parameters<typeof route>[4]>[0]) =>
    reply.fail(new ApiError('wrong_role', `this process runs ROLE=${role}; this path is served by processes with ${SERVED_BY[servedBy]} or ROLE=all`), true)
  // The receipt paths where this process's receipt store is not the whole one (RECEIPT_PATHS).
  if (!receipts.receiptsHere) for (const path of RECEIPT_PATHS) route(parts.app, 'any', path, parts.logger, misdirected(receipts.receiptsServedBy))
  if (role === 'all') return
  if (role !== 'delivery') for (const path of DELIVERY_PATHS) route(parts.app, 'any', path, parts.logger, misdirected('delivery'))
  // uWS prefers a static or parameter match over a wildcard: the paths above and those this process serves win.
  if (role !== 'gateway') route(parts.app, 'any', '/v1/*', parts.logger, misdirected('gateway'))
}
