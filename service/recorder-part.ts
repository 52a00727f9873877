import { join } from 'node:path'
import { ClickHouseReceiptStore, isReceiptStoreError, type ClickHouseTarget } from '../receipts/index.js'
import { openLeasedConsumer, type LeasedConsumer } from '../pipeline/index.js'
import { Recorder } from '../recorder/index.js'
import type { ServiceCore } from './setup.js'

/** The recorder's durable consumer: the one name every recorder of a deployment pulls. */
const RECORDER_CONSUMER = 'recorder'

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
  const { logger } = core
  const receipts = new ClickHouseReceiptStore({ target: receiptTarget(core) })
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
export function createRecorder(core: ServiceCore, receipts: ClickHouseReceiptStore, lastSeq: () => number, consumer?: LeasedConsumer): Recorder {
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
    ...(consumer && { openConsumer: async () => consumer }),
  })
}

/** Leases are a few small entries: one per leased consumer. */
export const LEASES_BUCKET_LIMITS = { maxKeys: 1024, maxValueBytes: 1024 }

/**
 * The recorder's durable consumer under a lease on the key-value port, in refuse mode:
 * two recorders pulling one consumer lose records (an ack covers every record before it),
 * so a second recorder of the cluster does not start; it names the holder. A lease lost
 * while running (this process frozen past its validity) stops the process, whose restart
 * takes the lease again or is refused.
 */
export async function openRecorderLease(core: ServiceCore): Promise<{ consumer: LeasedConsumer; close(): Promise<void> }> {
  const bucket = await core.openBucket('leases', LEASES_BUCKET_LIMITS)
  try {
    const consumer = await core.steps.time('recorder_lease', () =>
      openLeasedConsumer(core.signalLog, bucket, RECORDER_CONSUMER, undefined, {
        mode: 'refuse',
        onLost: (loss) => core.failFatally(new Error(`the recorder's lease was lost (${loss.reason}, now held by ${loss.holder ?? 'nobody'})`), 'recorder lease lost; stopping so that another recorder goes on'),
        onError: (err) => core.logger.warn({ err }, 'recorder lease: a renewal failed'),
      }),
    )
    return {
      consumer,
      async close() {
        await consumer.close()
        await bucket.close()
      },
    }
  } catch (err) {
    await bucket.close()
    throw err
  }
}
