import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import { connect, type NatsConnection } from '@nats-io/transport-node'
import { ConfigError, type Config } from '../config/index.js'
import { openJetStreamLog, type JetStreamLogOptions } from '../pipeline/log-jetstream.js'
import { natsKvBuckets } from '../storage/index.js'
import type { BackendHooks, Backends } from './index.js'
import { retryAtStart } from './start-retry.js'

/**
 * How long the stream remembers a dedup id (JetStream duplicate_window). It only has to
 * cover an append retried after an ambiguous answer (a timeout, a lost connection); a
 * signal sent twice is told apart by the signal index, over the whole DEDUP_WINDOW_S.
 */
export const STREAM_DUPLICATE_WINDOW_MS = 120_000

/** The signal log on the JetStream stream NATS_STREAM and the key-value port on NATS KV, over one connection. */
export async function openNatsBackends({ config, logger, dataDir, time }: BackendHooks): Promise<Backends> {
  const nc = await time('nats_connect', () => connectNats(config, config.ROLE))
  // The client reconnects on its own; each loss is logged, requests meanwhile fail as unavailable.
  void (async () => {
    for await (const status of nc.status()) {
      if (status.type === 'disconnect' || status.type === 'reconnect') logger.warn({ nats: status.type, server: status.server }, `nats: ${status.type}`)
    }
  })().catch(() => undefined)
  try {
    const signalLog = await time('signal_stream', () =>
      retryAtStart('the signal stream', () => openJetStreamLog(signalStreamOptions(config, nc)), logger),
    )
    return {
      kind: 'nats',
      signalLog,
      openBucket: natsKvBuckets(nc, { replicas: config.NATS_REPLICAS }),
      tailConsumerName: tailConsumerName(dataDir),
      leasedRecorder: true,
      sharedStreamPlaces: true,
      nats: nc,
      close: () => nc.drain(),
    }
  } catch (err) {
    await nc.close()
    throw err
  }
}

/** A client of the servers in NATS_URL, named after `what` runs on it, reconnecting for as long as it runs. */
export function connectNats(config: Config, what: string): Promise<NatsConnection> {
  const servers = config.NATS_URL.split(',').map((s) => s.trim()).filter((s) => s !== '')
  if (servers.length === 0) throw new ConfigError(`NATS_URL=${JSON.stringify(config.NATS_URL)} names no server`)
  return connect({ servers, maxReconnectAttempts: -1, name: `signal-ingest-gateway ${what} ${hostname()}/${process.pid}` })
}

/** The signal stream as every process of the cluster opens it (and moving an embedded deployment over creates it). */
export function signalStreamOptions(config: Config, nc: NatsConnection): JetStreamLogOptions {
  return {
    connection: nc,
    stream: config.NATS_STREAM,
    // Subjects named after the stream, so a stream never takes another's subjects. The
    // key-value buckets (registry, leases, ...) have fixed names: one deployment per NATS.
    subjectPrefix: `signals.${config.NATS_STREAM}`,
    replicas: config.NATS_REPLICAS,
    dedupWindowMs: STREAM_DUPLICATE_WINDOW_MS,
    maxAgeMs: config.JOURNAL_RETENTION_MAX_AGE_S * 1000,
    maxBytes: config.JOURNAL_RETENTION_MAX_BYTES,
  }
}

/**
 * One name per data folder of one host: no two processes share it (each holds its
 * DATA_DIR's lock), and a restart reuses it, so the tail's start deletes the consumer its
 * last run left instead of leaving one behind on the stream for every run.
 */
function tailConsumerName(dataDir: string): string {
  return `delivery-live-${createHash('sha256').update(`${hostname()}\0${dataDir}`).digest('hex').slice(0, 16)}`
}
