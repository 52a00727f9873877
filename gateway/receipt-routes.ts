import type { ReceiptStore } from '../receipts/index.js'
import type { Rentals } from '../rentals/index.js'
import type { ClientAddresses } from './client-address.js'
import { registerScoringRoutes, type LogOutcomes } from './control/scoring-routes.js'
import { registerSourceStatusRoute } from './control/source-status-route.js'
import type { JsonRoutesParts } from './http/json-route.js'
import type { Metrics } from './metrics.js'
import { registerReadRoutes, type LogRouteOptions, type ReadOptions } from './reads/index.js'

/** The receipt log's paths: served with the receipts, by every process that reads the receipt store. */
export const LOG_PATHS: readonly string[] = [
  '/v1/log/checkpoint',
  '/v1/log/key',
  '/v1/log/keys',
  '/v1/log/tile/*',
  '/v1/log/consistency',
  '/v1/byo/receipts/:receipt_id/proof',
  '/v1/admin/log-keys/rotate',
]

/**
 * Every path that reads or writes receipts: the receipt reads and exports, usage, a
 * source's status (its receipt figures) and the scoring outcomes. They are served where
 * the receipt store is whole: the gateway of a process on the embedded backends, and on
 * NATS the process holding the recorder (the one writer of an embedded receipt store), or
 * every gateway when the store is a ClickHouse server. Elsewhere they answer
 * `421 wrong_role`. `registerReceiptRoutes` refuses to start if this list and the routes
 * it registers ever differ.
 */
export const RECEIPT_PATHS: readonly string[] = [
  '/v1/byo/receipts',
  '/v1/byo/receipts/export',
  '/v1/byo/receipts/:receipt_id',
  '/v1/byo/sources/:source_id/receipts',
  '/v1/byo/sources/:source_id/receipts/export',
  '/v1/byo/sources/:source_id/status',
  '/v1/byo/sources/:source_id/stats',
  '/v1/usage',
  '/v1/admin/usage',
  '/v1/scoring/outcomes',
  ...LOG_PATHS,
]

export interface ReceiptRouteOptions {
  readonly receipts: ReceiptStore
  /** Gives each post of outcomes its place in the signal log, for the receipt log. */
  readonly logOutcomes: LogOutcomes
  /** Renters read the receipts of the sources they rent. */
  readonly rentals: Rentals
  /** How long a source's public status keeps its receipt figures (STATUS_CACHE_MS). */
  readonly statusCacheMs: number
  /** The receipt reads' allowances, export caps and usage meter. */
  readonly reads: Pick<ReadOptions, 'limiter' | 'rates' | 'exportsPerCaller' | 'exportsMax' | 'exportIdleTimeoutMs' | 'meter'>
  /** The receipt log's reads; without it (a process that does not open the log) its paths are not served. */
  readonly log?: LogRouteOptions
}

export function registerReceiptRoutes(parts: JsonRoutesParts, o: ReceiptRouteOptions, edge: { readonly clientAddresses: ClientAddresses; readonly metrics: Metrics }): void {
  const before = new Set(parts.routes.keys())
  registerScoringRoutes(parts, o.receipts, o.logOutcomes, Date.now)
  registerSourceStatusRoute(parts, { receipts: o.receipts, cacheMs: o.statusCacheMs, now: Date.now, logger: parts.logger })
  registerReadRoutes(parts, { ...o.reads, receipts: o.receipts, rentals: o.rentals, clientAddresses: edge.clientAddresses, logger: parts.logger, metrics: edge.metrics.registry, ...(o.log && { log: o.log }) })
  const added = [...parts.routes.keys()].filter((p) => !before.has(p))
  const unlisted = added.filter((p) => !RECEIPT_PATHS.includes(p))
  const missing = RECEIPT_PATHS.filter((p) => !added.includes(p) && (o.log !== undefined || !LOG_PATHS.includes(p)))
  // A receipt route left out of the list would get a 404 instead of a 421 where it is not served.
  if (unlisted.length > 0 || missing.length > 0) throw new Error(`RECEIPT_PATHS is out of date: not listed ${JSON.stringify(unlisted)}, not served ${JSON.stringify(missing)}`)
}
