import type { BlockList } from 'node:net'
import { networkInterfaces } from 'node:os'
import type { Logger } from 'pino'
import type { IngestErrorLog, IngestPipeline, VerifyPool } from '../pipeline/index.js'
import type { Registry } from '../registry/index.js'
import type { Rentals } from '../rentals/index.js'
import type { Webhooks } from '../delivery/index.js'
import type { ReceiptStore } from '../receipts/index.js'
import { ConfigError } from '../config/index.js'
import { ApiError, type RateCeiling, openApiDocument } from '../schemas/index.js'
import { registerAdminRoutes } from './control/admin-routes.js'
import { registerAgentAdminRoutes } from './control/agent-admin-routes.js'
import { registerAgentRoutes } from './control/agent-routes.js'
import { registerIngestErrorsRoute } from './control/ingest-errors-route.js'
import { registerDisputeRoutes } from './control/dispute-routes.js'
import { registerKeyRoutes } from './control/key-routes.js'
import { registerSourceLifecycleRoutes } from './control/source-lifecycle-routes.js'
import { registerRentalRoutes } from './control/rental-routes.js'
import { registerWebhookRoutes } from './control/webhook-routes.js'
import { registerSourceRoutes } from './control/source-routes.js'
import { registerScoringRoutes } from './control/scoring-routes.js'
import { registerSourceStatusRoute } from './control/source-status-route.js'
import { registerReadRoutes, type ReadOptions } from './reads/index.js'
import { BodyReader } from './http/body-reader.js'
import { getRoute, MAX_CONTROL_SLOW_UPLOADS, noteMethods, refuseOtherMethods, type JsonRoutesParts } from './http/json-route.js'
import { route } from './http/route.js'
import type { Reply } from './http/reply.js'
import { uws, type us_listen_socket } from './http/uws.js'
import { ingestHandler } from './ingest-edge.js'
import { ClientAddresses } from './client-address.js'
import { Metrics } from './metrics.js'
import { registerMetricsRoute } from './metrics-route.js'
import { registerRecorderMetrics, type RecorderReadings } from './recorder-metrics.js'
import { registerWebhookMetrics } from './webhook-metrics.js'
import { ProvenAddresses } from './proven-addresses.js'
import { registerPollRoute, registerStreamMetrics, registerStreamRoutes, type PollRouteOptions, type StreamRouteOptions } from './streams/index.js'

export interface GatewayOptions {
  readonly host: string
  readonly port: number
  /** Base of `ingest_endpoint`; empty means http://localhost:<bound port>. */
  readonly publicBaseUrl: string
  readonly bodyTimeoutMs: number
  /** Bodies not complete when their head was read, being received at once (BodyReader). */
  readonly maxSlowBodies: number
  /** The proxies whose X-Forwarded-For names the client (ClientAddresses); undefined trusts none. */
  readonly trustedProxies: BlockList | undefined
  /** The highest max_rate a new source may declare. */
  readonly rateCeiling: RateCeiling
  readonly registry: Registry
  readonly rentals: Rentals
  /** Receipts: read by the receipts API, written by the recorder. */
  readonly receipts: ReceiptStore
  /** Renters' webhooks and the delivery keys; absent when no delivery runs in this process. */
  readonly webhooks?: Webhooks
  /** How long a source's public status keeps its receipt figures (STATUS_CACHE_MS). */
  readonly statusCacheMs: number
  /** The recorder, for its metrics and its detail in /readyz; absent when none runs in this process. */
  readonly recorder?: RecorderReadings
  /** The receipt reads' allowances, export caps and usage meter. */
  readonly reads: Pick<ReadOptions, 'limiter' | 'rates' | 'exportsPerCaller' | 'exportsMax' | 'meter'>
  /** The renters' event streams and polling; absent: those routes are not served. */
  readonly streams?: StreamRouteOptions & Pick<PollRouteOptions, 'log' | 'endSettleMs'>
  readonly pipeline: IngestPipeline
  readonly pool: VerifyPool
  readonly errors: IngestErrorLog
  readonly logger: Logger
  /** False once the signal log has failed for good (draining is checked separately). */
  readonly isReady: () => boolean
  /**
   * True while the service rebuilds its nonce and dedup state from the signal log: the
   * gateway already listens, so /healthz answers (a liveness probe must not kill a long
   * start), /readyz says `starting`, ingest gets 503 `not_ready`; the control plane,
   * whose registry is loaded, is served.
   */
  readonly isStarting: () => boolean
}

export interface Gateway {
  /** The port actually bound (useful with port 0). */
  readonly port: number
  /** Stops accepting, waits for in-flight requests up to `graceMs`. Safe to call twice. */
  drain(graceMs: number): Promise<void>
}

const INGEST_PATH = '/v1/byo/sources/:source_id/signals'

/** Starts the HTTP edge: ingest, control plane, health. */
export async function startGateway(options: GatewayOptions): Promise<Gateway> {
  const app = uws.App()
  const bodies = new BodyReader(options.bodyTimeoutMs, options.maxSlowBodies)
  // Its own reader, so that ingest uploads held back cannot take the control plane's places.
  const controlBodies = new BodyReader(options.bodyTimeoutMs, MAX_CONTROL_SLOW_UPLOADS)
  // A count, not a set of replies: drain only needs to know when it reaches zero, and a
  // set's add and delete per request would churn its hash table (garbage, some of it
  // old-generation) on the hottest path.
  let inFlight = 0
  let draining = false
  let drained: (() => void) | undefined
  const finished = () => {
    inFlight--
    if (draining && inFlight === 0) drained?.()
  }
  const track = (reply: Reply) => {
    inFlight++
    reply.onFinish = finished
  }
  const isDraining = () => draining
  const provenAddresses = new ProvenAddresses(Date.now)
  const metrics = new Metrics({
    verifySlotsTaken: () => options.pool.pending,
    liveNonces: () => options.pipeline.liveNonces,
    dedupEntries: () => options.pipeline.dedupEntries,
    journalLastSeq: () => options.pipeline.logLastSeq,
    inFlightRequests: () => inFlight,
    provenAddresses: () => provenAddresses.size,
  })
  if (options.recorder !== undefined) registerRecorderMetrics(metrics.registry, options.recorder)
  if (options.webhooks !== undefined) registerWebhookMetrics(metrics.registry, options.webhooks)
  const summary = setInterval(() => {
    const refusals = metrics.refusalsSinceLastSummary()
    if (Object.keys(refusals).length > 0) options.logger.info({ refusals }, 'ingest refusals in the last minute')
  }, 60_000).unref()
  const clientAddresses = new ClientAddresses(options.trustedProxies)
  const parts: JsonRoutesParts = { app, registry: options.registry, bodies: controlBodies, logger: options.logger, isDraining, track, controlBodyBytes: { inFlight: 0 }, routes: new Map() }

  noteMethods(parts, INGEST_PATH, 'POST')
  route(
    app,
    'post',
    INGEST_PATH,
    options.logger,
    ingestHandler({
      registry: options.registry,
      pipeline: options.pipeline,
      pool: options.pool,
      errors: options.errors,
      bodies,
      logger: options.logger,
      now: Date.now,
      isDraining,
      isStarting: options.isStarting,
      track,
      metrics,
      provenAddresses,
      clientAddresses,
    }),
  )
  registerAdminRoutes(parts)
  let baseUrl = options.publicBaseUrl
  registerSourceRoutes(parts, () => baseUrl, options.rateCeiling)
  registerAgentRoutes(parts, () => baseUrl)
  registerAgentAdminRoutes(parts)
  registerSourceLifecycleRoutes(parts, () => baseUrl, options.rateCeiling, () => options.pipeline.settled())
  registerKeyRoutes(parts, () => options.pipeline.settled())
  registerIngestErrorsRoute(parts, options.errors)
  registerRentalRoutes(parts, options.rentals)
  if (options.webhooks !== undefined) registerWebhookRoutes(parts, options.rentals, options.webhooks)
  registerScoringRoutes(parts, options.receipts, Date.now)
  registerSourceStatusRoute(parts, { receipts: options.receipts, cacheMs: options.statusCacheMs, now: Date.now, logger: options.logger })
  registerReadRoutes(parts, { ...options.reads, receipts: options.receipts, rentals: options.rentals, clientAddresses, logger: options.logger })
  const streams = options.streams === undefined ? undefined : registerStreamRoutes(parts, options.streams)
  if (options.streams !== undefined) {
    registerPollRoute(parts, options.streams)
    registerStreamMetrics(metrics.registry, options.streams.hub)
  }
  // A signal is stored at most a body's time, a verification and an append after its arrival.
  const maxLagMs = options.bodyTimeoutMs + 60_000
  registerDisputeRoutes(parts, {
    hasAccepted: (sourceId, signalId) => options.pipeline.hasAccepted(sourceId, signalId),
    findAccepted: (sourceId, signalId, receivedAtMs, budget) => options.pipeline.findAccepted(sourceId, signalId, receivedAtMs, maxLagMs, budget),
    logEnd: () => options.pipeline.logEnd(),
  })

  getRoute(parts, '/healthz', (reply) => reply.send(200, { ok: true, data: { status: 'alive' } }))
  getRoute(parts, '/readyz', (reply) => {
    if (!draining && !options.isStarting() && options.isReady()) {
      // Ready whatever the recorder's lag: ingest only appends to the log, which holds the signals until they are recorded.
      const recorder = options.recorder?.status()
      reply.send(200, { ok: true, data: { status: 'ready', verify_queue: options.pool.pending, ...(recorder && { recorder }) } })
    } else reply.fail(new ApiError('not_ready', draining ? 'shutting down' : options.isStarting() ? 'starting' : 'the signal log failed', { retryAfter: 1 }))
  })
  registerMetricsRoute(parts, metrics, options.logger, Date.now)
  getRoute(parts, '/v1/openapi.json', (reply) => reply.send(200, openApiDocument(baseUrl)))
  refuseOtherMethods(parts)
  route(app, 'any', '/*', options.logger, (reply) => reply.fail(new ApiError('not_found', 'no such endpoint'), true))

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    // Exclusive: uWS sets SO_REUSEPORT by default, and a second gateway on the same port
    // would then silently take half the connections.
    // The binding takes (host, port, options, cb), which its typings leave out.
    const { LIBUS_LISTEN_EXCLUSIVE_PORT } = uws as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT: number }
    const listen = app.listen as unknown as (host: string, port: number, options: number, cb: (s: us_listen_socket | false) => void) => void
    listen.call(app, options.host, options.port, LIBUS_LISTEN_EXCLUSIVE_PORT, (socket) =>
      socket ? resolve(socket) : reject(listenError(options.host, options.port)),
    )
  })
  const port = uws.us_socket_local_port(listenSocket)
  if (baseUrl === '') baseUrl = `http://localhost:${port}`

  let drainPromise: Promise<void> | undefined
  return {
    port,
    drain(graceMs: number): Promise<void> {
      drainPromise ??= (async () => {
        draining = true
        uws.us_listen_socket_close(listenSocket)
        // Streams never finish by themselves: they end now, and their clients resume elsewhere.
        streams?.stop()
        streams?.closeAll()
        if (inFlight > 0) {
          await new Promise<void>((resolve) => {
            drained = resolve
            setTimeout(resolve, graceMs).unref()
          })
        }
        bodies.close()
        controlBodies.close()
        clearInterval(summary)
      })()
      return drainPromise
    },
  }
}

/**
 * Why the listen failed, as far as can be told: an address this machine does not have
 * is the operator's HOST (a ConfigError: restarting would not fix it); otherwise the
 * port is taken, which a restart may outlive.
 */
function listenError(host: string, port: number): Error {
  const own = new Set(['0.0.0.0', '::', 'localhost', ...Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((a) => a.address))])
  if (!own.has(host)) return new ConfigError(`HOST=${JSON.stringify(host)} is not an address of this machine (it has ${[...own].join(', ')})`)
  return new PortInUseError(host, port)
}

/** Another process holds the port: not a configuration mistake, and a restart may outlive it. */
export class PortInUseError extends Error {
  readonly code = 'port_in_use'
  constructor(host: string, port: number) {
    super(`cannot listen on ${host}:${port}: the port is in use (PORT=${port})`)
    this.name = 'PortInUseError'
  }
}
