/**
 * The backends one process runs on, chosen at start by NATS_URL: the embedded ones (the
 * journal and file buckets under DATA_DIR, for one process) or NATS (the signal log on
 * JetStream, the key-value port on NATS KV, shared by the processes of a cluster). The
 * parts of the service see only the ports (SignalLog, OpenKvBucket) and the few choices
 * that differ between the two, named here.
 */
import type { NatsConnection } from '@nats-io/transport-node'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import type { SignalLog } from '../pipeline/index.js'
import type { OpenKvBucket } from '../storage/index.js'
import { openEmbeddedBackends } from './embedded.js'
import { openNatsBackends } from './nats.js'

export { retryAtStart } from './start-retry.js'
export { openEmbeddedBackends } from './embedded.js'
export { connectNats, signalStreamOptions } from './nats.js'

export interface Backends {
  readonly kind: 'embedded' | 'nats'
  readonly signalLog: SignalLog
  /** Buckets of the key-value port: files under DATA_DIR/kv, or NATS KV buckets. */
  readonly openBucket: OpenKvBucket
  /**
   * The name of this process's live tail consumer. Processes sharing one durable consumer
   * would split its records between them, so on NATS each process has its own name.
   */
  readonly tailConsumerName: string | undefined
  /**
   * Whether the recorder's durable consumer is opened under a lease: on NATS another
   * process may pull it, and two pulling one consumer lose records; embedded, the
   * DATA_DIR lock already makes this process the only one.
   */
  readonly leasedRecorder: boolean
  /**
   * Whether the per-rental cap of open event streams is counted on the key-value port: on
   * NATS other delivery processes serve the same rentals' streams; embedded, this process
   * is the only one (it holds the DATA_DIR lock) and counts them in memory, with no write
   * per stream.
   */
  readonly sharedStreamPlaces: boolean
  /** The connection the NATS backends share (the gateway's ingest state is on it too); undefined when embedded. */
  readonly nats: NatsConnection | undefined
  /** After the signal log and every bucket closed: the connection, if any. */
  close(): Promise<void>
}

export interface BackendHooks {
  readonly config: Config
  readonly logger: Logger
  readonly dataDir: string
  /** A backend that cannot recover in place: the process stops and is restarted. */
  readonly failFatally: (err: Error, message: string) => void
  readonly time: <T>(step: string, run: () => Promise<T>) => Promise<T>
}

export async function openBackends(hooks: BackendHooks): Promise<Backends> {
  return hooks.config.NATS_URL === '' ? openEmbeddedBackends(hooks) : openNatsBackends(hooks)
}
