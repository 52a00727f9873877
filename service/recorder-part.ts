import { join } from 'node:path'
import { ClickHouseReceiptStore, isReceiptStoreError, type ClickHouseTarget } from '../receipts/index.js'
import { Recorder } from '../recorder/index.js'
import type { ServiceCore } from './setup.js'

/**
 * The receipt store, for the roles that read receipts (gateway) or write them (recorder):
 * the embedded engine under DATA_DIR, or a ClickHouse server. The schema is migrated here.
 */
export async function openReceiptStore(core: ServiceCore): Promise<ClickHouseReceiptStore> {
  const { config, dataDir, logger } = core
  const target: ClickHouseTarget =
    config.CLICKHOUSE_URL === ''
      ? { kind: 'chdb', path: join(dataDir, 'clickhouse'), maxServerMemoryBytes: config.CLICKHOUSE_MAX_MEMORY_MB * 1024 * 1024 }
      : { kind: 'server', url: config.CLICKHOUSE_URL, requestTimeoutMs: config.CLICKHOUSE_TIMEOUT_MS }
  const receipts = new ClickHouseReceiptStore({ target })
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
export function createRecorder(core: ServiceCore, receipts: ClickHouseReceiptStore, lastSeq: () => number): Recorder {
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
  })
}
