import type { BlockList } from 'node:net'
import { networkInterfaces } from 'node:os'
import type { Logger } from 'pino'
import type { Registry } from '../registry/index.js'
import { ConfigError, type Role } from '../config/index.js'
import { ApiError, openApiDocument } from '../schemas/index.js'
import { registerApiRoutes, type ApiOptions } from './api-routes.js'
import { BodyReader } from './http/body-reader.js'
import { getRoute, MAX_CONTROL_SLOW_UPLOADS, refuseOtherMethods, type JsonRoutesParts } from './http/json-route.js'
import { route } from './http/route.js'
import type { Reply } from './http/reply.js'
import { uws, type us_listen_socket } from './http/uws.js'
import { ClientAddresses } from './client-address.js'
import { Metrics } from './metrics.js'
import { registerMetricsRoute } from './metrics-route.js'
import { registerReceiptRoutes, type ReceiptRouteOptions } from './receipt-routes.js'
import { registerRecorderMetrics, type RecorderReadings } from './recorder-metrics.js'
import { ProvenAddresses } from './proven-addresses.js'
import { registerWebPages } from './web-pages.js'
import { registerDeliveryRoutes, registerOtherRoles, type DeliveryRouteOptions } from './role-routes.js'

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
  /** What this process runs (ROLE): the paths of the roles it does not run answer `421 wrong_role`. */
  readonly role: Role
  readonly registry: Registry
  /** Ingest, the control plane and the receipt reads; absent when the gateway role does not run here. */
  readonly api?: ApiOptions
  /** The receipt reads, exports, usage, source status and scoring; absent where the receipt store here is not the whole one (receipt-routes.ts). */
  readonly receiptRoutes?: ReceiptRouteOptions
  /** Which role serves the receipt paths where this process does not: named in their 421. */
  readonly receiptsServedBy: 'gateway' | 'recorder'
  /** The renters' streams, polling and webhooks; absent when the delivery role does not run here. */
  readonly delivery?: DeliveryRouteOptions
  /** The recorder, for its metrics and its detail in /readyz; absent when none runs in this process. */
  readonly recorder?: RecorderReadings
  /** The signal log's last sequence number, for the metrics. */
  readonly logLastSeq: () => number
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

/** Starts the HTTP edge: the routes of the roles this process runs, health, readiness and metrics. */
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
  const api = options.api
  // A process without ingest holds no verifications, nonces or dedup entries: its gauges read 0.
  const metrics = new Metrics({
    verifySlotsTaken: () => api?.pool.pending ?? 0,
    liveNonces: () => api?.pipeline.liveNonces ?? 0,
    dedupEntries: () => api?.pipeline.dedupEntries ?? 0,
    journalLastSeq: options.logLastSeq,
    inFlightRequests: () => inFlight,
    provenAddresses: () => provenAddresses.size,
  })
  if (options.recorder !== undefined) registerRecorderMetrics(metrics.registry, options.recorder)
  const summary = setInterval(() => {
    const refusals = metrics.refusalsSinceLastSummary()
    if (Object.keys(refusals).length > 0) options.logger.info({ refusals }, 'ingest refusals in the last minute')
  }, 60_000).unref()
  const clientAddresses = new ClientAddresses(options.trustedProxies)
  const parts: JsonRoutesParts = { app, registry: options.registry, bodies: controlBodies, logger: options.logger, isDraining, track, controlBodyBytes: { inFlight: 0 }, routes: new Map() }

  let baseUrl = options.publicBaseUrl
  if (api !== undefined) {
    const edge = { bodies, bodyTimeoutMs: options.bodyTimeoutMs, isDraining, isStarting: options.isStarting, track, metrics, provenAddresses, clientAddresses, baseUrl: () => baseUrl }
    registerApiRoutes(parts, api, edge)
  }
  if (options.receiptRoutes !== undefined) registerReceiptRoutes(parts, options.receiptRoutes, { clientAddresses, metrics })
  const streams = options.delivery === undefined ? undefined : registerDeliveryRoutes(parts, options.delivery, metrics)

  getRoute(parts, '/healthz', (reply) => reply.send(200, { ok: true, data: { status: 'alive' } }))
  getRoute(parts, '/readyz', (reply) => {
    if (!draining && !options.isStarting() && options.isReady()) {
      // Ready whatever the recorder's lag: ingest only appends to the log, which holds the signals until they are recorded.
      const recorder = options.recorder?.status()
      const hub = options.delivery?.streams.hub
      reply.send(200, {
        ok: true,
        data: {
          status: 'ready',
          role: options.role,
          ...(api && { verify_queue: api.pool.pending }),
          ...(recorder && { recorder }),
          ...(hub && { delivery: { open_streams: hub.openStreams } }),
        },
      })
    } else reply.fail(new ApiError('not_ready', draining ? 'shutting down' : options.isStarting() ? 'starting' : 'the signal log failed', { retryAfter: 1 }))
  })
  registerMetricsRoute(parts, metrics, options.logger, Date.now)
  getRoute(parts, '/v1/openapi.json', (reply) => reply.send(200, openApiDocument(baseUrl)))
  registerWebPages(parts)
  refuseOtherMethods(parts)
  registerOtherRoles(parts, options.role, { receiptsHere: options.receiptRoutes !== undefined, receiptsServedBy: options.receiptsServedBy })
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
        const hub = options.delivery?.streams.hub
        if (hub !== undefined) options.logger.info({ streams_closed: hub.disconnects.get('shutdown') }, 'open event streams closed for the shutdown; their clients resume on another process')
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
