import type { NatsConnection } from '@nats-io/transport-node'
import { retryAtStart } from '../backends/index.js'
import type { Config } from '../config/index.js'
import { composeNatsIngest, IngestPipeline, type NatsIngestOptions } from '../pipeline/index.js'
import { REGISTRY_LIMITS } from '../registry/index.js'
import { NONCE_WINDOW_MS } from '../schemas/index.js'
import type { GatewayIngest, GatewayIngestInput } from './gateway-ingest.js'
import type { ServiceCore } from './setup.js'

/**
 * Streams the signal index is spread over, by a hash of the source id: each is a stream
 * of its own, which a cluster places on its own servers, so the index's writes are not
 * all on one stream leader.
 */
const SIGNAL_INDEX_PARTITIONS = 4

/**
 * Where and how the ingest state lives on NATS, from the configuration: what every gateway
 * opens, and what moving an embedded deployment over writes into.
 */
export function natsIngestOptions(config: Config, nc: NatsConnection, onWarning: (message: string, err: unknown) => void): NatsIngestOptions {
  const dedupWindowMs = config.DEDUP_WINDOW_S * 1000
  return {
    nc,
    name: config.NATS_STREAM,
    nonceWindowMs: NONCE_WINDOW_MS,
    maxLiveNonces: config.NONCE_STORE_MAX,
    dedupWindowMs,
    // An id accepted while its signal can still be in the log is `reused` past the window.
    signalRetainMs: Math.max(dedupWindowMs, config.JOURNAL_RETENTION_MAX_AGE_S * 1000),
    maxSignalEntries: config.SIGNAL_ID_HISTORY_MAX,
    signalPartitions: SIGNAL_INDEX_PARTITIONS,
    refusalsPerSource: config.INGEST_ERRORS_PER_SOURCE,
    maxRefusals: config.INGEST_ERRORS_UNVERIFIED_MAX,
    replicas: config.NATS_REPLICAS,
    flagAfterMinutes: config.OVER_RATE_FLAG_MINUTES,
    maxSources: REGISTRY_LIMITS.sources,
    onWarning,
  }
}

/**
 * The ingest state every gateway of a cluster shares, on JetStream: nonces claimed once
 * across gateways, one dedup decision per signal id, the refusal history, and the
 * revocation barrier. Nothing to rebuild at start and nothing to save at stop.
 */
export async function openNatsGatewayIngest(core: ServiceCore, nc: NatsConnection, { pool, rateCeiling }: GatewayIngestInput): Promise<GatewayIngest> {
  const { config, logger, steps, signalLog, registry } = core
  const warn = (message: string, err: unknown) => logger.warn({ err }, message)
  const shared = await steps.time('ingest_state', () =>
    retryAtStart('the ingest state', () => composeNatsIngest({
      ...natsIngestOptions(config, nc, warn),
      // Another gateway's revocation is acknowledged only once this one's registry view shows it.
      registryCaughtUp: () => registry.caughtUp(),
    }), logger),
  )
  const pipeline = new IngestPipeline({
    log: signalLog,
    pool,
    registry,
    ports: shared.ports,
    now: Date.now,
    nonceWindowMs: NONCE_WINDOW_MS,
    appendQueueLimit: config.JOURNAL_QUEUE_LIMIT,
    rateCeiling,
    onWarning: warn,
    // JetStream errors are per request (503, retried by the client); this is the log refusing for good.
    onLogFailure: (err) => core.failFatally(err, 'signal log failed; stopping so that a restart reconnects'),
  })
  return {
    pipeline,
    errors: shared.refusals,
    revocations: shared.ports.revocations,
    async rebuild() {
      await pipeline.start()
      logger.info({ ms: steps.report(), log: await signalLog.info() }, 'ingest state on NATS')
    },
    run() {},
    async stop() {},
    async close() {
      await shared.close()
    },
  }
}
