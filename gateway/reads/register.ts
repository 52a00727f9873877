import type { Logger } from 'pino'
import type { Registry as MetricsRegistry } from 'prom-client'
import type { ReceiptStore } from '../../receipts/index.js'
import type { Rentals } from '../../rentals/index.js'
import type { ClientAddresses } from '../client-address.js'
import type { JsonRoutesParts } from '../http/json-route.js'
import { ExportFailures } from './export-failures.js'
import { ExportSlots } from './export-slots.js'
import { registerExportRoutes } from './export-route.js'
import { registerLogRoutes, type LogRouteOptions } from './log-routes.js'
import { ReceiptAccess } from './receipt-access.js'
import { registerReceiptRoutes } from './receipt-routes.js'
import { registerStatsRoute } from './stats-route.js'
import type { ReadRateLimiter } from './read-rate-limiter.js'
import type { ReadRates } from './read-route.js'
import type { UsageMeter } from './usage-meter.js'
import { registerUsageRoutes } from './usage-routes.js'

export interface ReadOptions {
  readonly receipts: ReceiptStore
  readonly rentals: Rentals
  readonly limiter: ReadRateLimiter
  readonly rates: ReadRates
  readonly exportsPerCaller: number
  readonly exportsMax: number
  /** EXPORT_IDLE_TIMEOUT_MS. */
  readonly exportIdleTimeoutMs: number
  readonly meter: UsageMeter
  readonly clientAddresses: ClientAddresses
  readonly logger: Logger
  /** Where sgw_export_failures_total is registered. */
  readonly metrics: MetricsRegistry
  readonly log?: LogRouteOptions
}

/** Registers the receipt reads, the exports, a source's counts and the usage endpoints. Exports first: their static path wins over `:receipt_id`. */
export function registerReadRoutes(parts: JsonRoutesParts, o: ReadOptions): void {
  const access = new ReceiptAccess(parts.registry, o.rentals)
  const r = { parts, clientAddresses: o.clientAddresses, limiter: o.limiter, rates: o.rates }
  const failures = new ExportFailures()
  failures.register(o.metrics)
  registerExportRoutes(r, { store: o.receipts, access, slots: new ExportSlots(o.exportsPerCaller, o.exportsMax), meter: o.meter, logger: o.logger, idleTimeoutMs: o.exportIdleTimeoutMs, failures })
  // Before the receipt by id: `:receipt_id/proof` is its own route.
  if (o.log !== undefined) registerLogRoutes(r, o.receipts, access, o.log)
  registerReceiptRoutes(r, o.receipts, access)
  registerStatsRoute(r, o.receipts, access)
  registerUsageRoutes(parts, o.meter)
}
