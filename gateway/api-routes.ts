import type { IngestPipeline, RefusalHistory, RevocationBarrier, VerifyPool } from '../pipeline/index.js'
import type { Rentals } from '../rentals/index.js'
import type { RateCeiling } from '../schemas/index.js'
import type { ClientAddresses } from './client-address.js'
import { registerAdminRoutes } from './control/admin-routes.js'
import { registerAgentAdminRoutes } from './control/agent-admin-routes.js'
import { registerAgentRoutes } from './control/agent-routes.js'
import { registerDisputeRoutes } from './control/dispute-routes.js'
import { registerIngestErrorsRoute } from './control/ingest-errors-route.js'
import { registerKeyRoutes } from './control/key-routes.js'
import { registerRentalRoutes } from './control/rental-routes.js'
import { registerSourceLifecycleRoutes } from './control/source-lifecycle-routes.js'
import { registerSourceRoutes } from './control/source-routes.js'
import type { BodyReader } from './http/body-reader.js'
import { noteMethods, type JsonRoutesParts } from './http/json-route.js'
import type { Reply } from './http/reply.js'
import { route } from './http/route.js'
import { ingestHandler } from './ingest-edge.js'
import type { Metrics } from './metrics.js'
import type { ProvenAddresses } from './proven-addresses.js'

/** What the gateway role serves over HTTP: signed ingest and the control plane (receipt-routes.ts has the receipt reads). */
export interface ApiOptions {
  /** The highest max_rate a new source may declare. */
  readonly rateCeiling: RateCeiling
  readonly rentals: Rentals
  readonly pipeline: IngestPipeline
  readonly pool: VerifyPool
  /** The refused ingest requests each creator lists. */
  readonly errors: RefusalHistory
  /** What a revocation or a retirement waits for before it is acknowledged. */
  readonly revocations: RevocationBarrier
}

/** What the edge lends the API routes: its body readers, request tracking and per-request state. */
export interface ApiEdge {
  /** Ingest's own body reader, so that uploads held back cannot take the control plane's places. */
  readonly bodies: BodyReader
  readonly bodyTimeoutMs: number
  readonly isDraining: () => boolean
  readonly isStarting: () => boolean
  readonly track: (reply: Reply) => void
  readonly metrics: Metrics
  readonly provenAddresses: ProvenAddresses
  readonly clientAddresses: ClientAddresses
  /** Base of `ingest_endpoint`, known once the gateway listens. */
  readonly baseUrl: () => string
}

export const INGEST_PATH = '/v1/byo/sources/:source_id/signals'

/** Registers ingest and the control plane (sources, keys, agents, tokens, rentals, disputes). */
export function registerApiRoutes(parts: JsonRoutesParts, o: ApiOptions, edge: ApiEdge): void {
  noteMethods(parts, INGEST_PATH, 'POST')
  route(
    parts.app,
    'post',
    INGEST_PATH,
    parts.logger,
    ingestHandler({
      registry: parts.registry,
      pipeline: o.pipeline,
      pool: o.pool,
      errors: o.errors,
      bodies: edge.bodies,
      logger: parts.logger,
      now: Date.now,
      isDraining: edge.isDraining,
      isStarting: edge.isStarting,
      track: edge.track,
      metrics: edge.metrics,
      provenAddresses: edge.provenAddresses,
      clientAddresses: edge.clientAddresses,
    }),
  )
  registerAdminRoutes(parts)
  registerSourceRoutes(parts, edge.baseUrl, o.rateCeiling)
  registerAgentRoutes(parts, edge.baseUrl)
  registerAgentAdminRoutes(parts)
  registerSourceLifecycleRoutes(parts, edge.baseUrl, o.rateCeiling, (scope) => o.revocations.settled(scope))
  registerKeyRoutes(parts, (scope) => o.revocations.settled(scope))
  registerIngestErrorsRoute(parts, o.errors)
  registerRentalRoutes(parts, o.rentals)
  // A signal is stored at most a body's time, a verification and an append after its arrival.
  const maxLagMs = edge.bodyTimeoutMs + 60_000
  registerDisputeRoutes(parts, {
    hasAccepted: (sourceId, signalId) => o.pipeline.hasAccepted(sourceId, signalId),
    findAccepted: (sourceId, signalId, receivedAtMs, budget) => o.pipeline.findAccepted(sourceId, signalId, receivedAtMs, maxLagMs, budget),
    placeDispute: (sourceId, disputeId, attempt) => o.pipeline.placeDispute(sourceId, disputeId, attempt),
  })
}
