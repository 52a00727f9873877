import { join } from 'node:path'
import { ClickHouseReceiptStore, isReceiptStoreError, type ClickHouseTarget, type MigrationLock } from '../receipts/index.js'
import { CONSUMER_LEASE_MS, defaultHolderId, openLeasedConsumer, type LeasedConsumer } from '../pipeline/index.js'
import { takeLeaseLock, type LeaseMode } from '../storage/index.js'
import { Recorder } from '../recorder/index.js'
import type { ServiceCore } from './setup.js'

/** The recorder's durable consumer: the one name every recorder of a deployment pulls. */
export const RECORDER_CONSUMER = 'recorder'

/** Leases are a few small entries: one per leased consumer, and the migration lock. */
export const LEASES_BUCKET_LIMITS = { maxKeys: 1024, maxValueBytes: 1024 }

/**
 * In a cluster on a ClickHouse server every gateway and recorder opens the one store, and
 * several may start at once: the schema is migrated by one of them at a time, under a
 * lease on the key-value port (schema-migrations.ts says why). Taken only when the stored
 * schema is behind this release, so a start on a current schema reads its version and
 * goes on.
 */
function migrationLease(core: ServiceCore): MigrationLock {
  return async () => {
    const bucket = await core.openBucket('leases', LEASES_BUCKET_LIMITS)
    try {
      const release = await core.steps.time('receipts_migration_lock', () =>
        takeLeaseLock({
          bucket,
          key: 'lease.receipts.migrate',
          holderId: defaultHolderId(),
          leaseMs: CONSUMER_LEASE_MS,
          onLost: () => core.logger.warn({}, 'receipt store: the migration lock lapsed while migrating (this process was held up); another process may migrate at the same time'),
          onError: (err) => core.logger.warn({ err }, 'receipt store: a renewal of the migration lock failed'),
        }),
      )
      return async () => {
        await release()
        await bucket.close()
      }
    } catch (err) {
      await bucket.close()
      throw err
    }
  }
}

/** Where receipts live: the embedded engine under DATA_DIR, or the ClickHouse server at CLICKHOUSE_URL. */
export function receiptTarget(core: ServiceCore): ClickHouseTarget {
  const { config, dataDir } = core
  return config.CLICKHOUSE_URL === ''
    ? { kind: 'chdb', path: join(dataDir, 'clickhouse'), maxServerMemoryBytes: config.CLICKHOUSE_MAX_MEMORY_MB * 1024 * 1024 }
    : { kind: 'server', url: config.CLICKHOUSE_URL, requestTimeoutMs: config.CLICKHOUSE_TIMEOUT_MS }
}

/**
 * The receipt store, for the roles that read receipts (gateway) or write them (recorder):
 * the embedded engine under DATA_DIR, or a ClickHouse server. The schema is migrated here.
 */
export async function openReceiptStore(core: ServiceCore): Promise<ClickHouseReceiptStore> {
  const { config, logger } = core
  const onServer = config.CLICKHOUSE_URL !== ''
  // On the embedded backends one process owns DATA_DIR, and with it the store's migrations.
  const shared = onServer && core.backends.kind !== 'embedded'
  const receipts = new ClickHouseReceiptStore({ target: receiptTarget(core), ...(shared && { migrationLock: migrationLease(core) }) })
  await core.steps.time('receipts', () =>
    receipts.open().catch((err: unknown) => {
      // ClickHouse down at start must not stop ingest: the log holds the signals and the
      // recorder opens the store when it answers. Any other failure (a newer schema) stops the start.
      if (!isReceiptStoreError(err) || !err.transient) throw err
      logger.warn({ err }, 'receipt store unavailable at start; ingest goes on and the recorder retries')
    }),
  )
  return receipts
}

/**
 * The recorder role: one durable consumer of the log writing receipts in batches. It
 * resumes from its acknowledged position, so signals accepted while no recorder ran
 * (a gateway-only process on this DATA_DIR) are recorded when one starts.
 */
export function createRecorder(core: ServiceCore, receipts: ClickHouseReceiptStore, lastSeq: () => number, lease?: RecorderLease): Recorder {
  const { config, logger } = core
  return new Recorder({
    log: core.signalLog,
    store: receipts,
    registry: core.registry,
    lastSeq,
    logger,
    batchMax: config.RECORDER_BATCH,
    flushMs: config.RECORDER_FLUSH_MS,
    retryMaxMs: config.RECORDER_RETRY_MAX_MS,
    ...(lease && { openConsumer: lease.openConsumer, standby: lease.mode === 'wait' }),
  })
}

export interface RecorderLease {
  readonly mode: LeaseMode
  /** The consumer once this process holds its lease; `signal` (the recorder stopping) ends the wait. */
  openConsumer(signal: AbortSignal): Promise<LeasedConsumer>
  close(): Promise<void>
}

/**
 * The recorder's durable consumer under a lease on the key-value port: two recorders
 * pulling one consumer lose records (an ack covers every record before it), so one
 * process of the cluster pulls it at a time.
 *
 * - `refuse` (receipts in the embedded engine under DATA_DIR, which only this recorder
 *   writes): taken before listening; a second recorder of the cluster does not start,
 *   and names the first.
 * - `wait` (receipts on a ClickHouse server, CLICKHOUSE_URL, which every recorder writes
 *   alike): any number of recorders start; each but the holder waits as a standby
 *   (`/readyz` shows it) and takes the consumer over when the holder stops, at once, or
 *   dies, once its lease lapses (CONSUMER_LEASE_MS after its last renewal). The new
 *   holder resumes from the last acknowledgement, and the records the dead one wrote but
 *   had not acknowledged are found in the store and not written again.
 *
 * A lease lost while running (this process frozen past its validity) stops the process,
 * whose restart takes the lease again, waits, or is refused.
 */
export async function openRecorderLease(core: ServiceCore, mode: LeaseMode): Promise<RecorderLease> {
  const bucket = await core.openBucket('leases', LEASES_BUCKET_LIMITS)
  let consumer: LeasedConsumer | undefined
  const open = (signal?: AbortSignal) =>
    openLeasedConsumer(core.signalLog, bucket, RECORDER_CONSUMER, undefined, {
      mode,
      ...(signal && { signal }),
      onLost: (loss) => core.failFatally(new Error(`the recorder's lease was lost (${loss.reason}, now held by ${loss.holder ?? 'nobody'})`), 'recorder lease lost; stopping so that another recorder goes on'),
      onError: (err) => core.logger.warn({ err }, 'recorder lease: a renewal failed'),
    })
  try {
    // Refused here, before listening, when another recorder holds it.
    if (mode === 'refuse') consumer = await core.steps.time('recorder_lease', () => open())
  } catch (err) {
    await bucket.close()
    throw err
  }
  return {
    mode,
    async openConsumer(signal) {
      if (consumer !== undefined) return consumer
      core.logger.info({}, 'recorder: waiting as a standby until the recorder holding the log consumer stops')
      consumer = await open(signal)
      core.logger.info({ holder: consumer.holderId }, 'recorder: took the log consumer over')
      return consumer
    },
    async close() {
      await consumer?.close()
      await bucket.close()
    },
  }
}
