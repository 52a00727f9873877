import { join } from 'node:path'
import { openJournal } from '../pipeline/index.js'
import { fileKvBuckets } from '../storage/index.js'
import type { BackendHooks, Backends } from './index.js'

/** The journal under DATA_DIR/journal and the buckets under DATA_DIR/kv: one process, which holds the DATA_DIR lock. */
export async function openEmbeddedBackends({ config, logger, dataDir, failFatally, time }: BackendHooks): Promise<Backends> {
  const openBucket = fileKvBuckets({
    dir: join(dataDir, 'kv'),
    // A failed fsync: what reached the disk is unknown until the files are read again.
    onFailure: (err) => failFatally(err, 'a key-value bucket failed; stopping so that a restart reloads it from disk'),
    onWarning: (message, err) => logger.warn({ err }, message),
  })
  // The dedup id is written with each record, for consumers and the JetStream backend; the
  // gateway role's own dedup index decides before every append, so the journal keeps no copy.
  const signalLog = await time('journal', () =>
    openJournal({
      dir: join(dataDir, 'journal'),
      fsync: config.JOURNAL_FSYNC,
      fsyncIntervalMs: config.JOURNAL_FSYNC_INTERVAL_MS,
      dedupWindowMs: 0,
      maxAgeMs: config.JOURNAL_RETENTION_MAX_AGE_S * 1000,
      maxBytes: config.JOURNAL_RETENTION_MAX_BYTES,
      // A start rebuilds the dedup and nonce state from this window of the journal.
      keepNewerThanMs: config.DEDUP_WINDOW_S * 1000,
      // Records found whole in the cut were written but never synced, so none was acknowledged.
      onRepair: (tail) => logger.warn({ tail }, 'signal log: cut a torn tail left by a crash'),
      onWarning: (message, err) => logger.warn({ err }, message),
    }),
  )
  return { kind: 'embedded', signalLog, openBucket, tailConsumerName: undefined, leasedRecorder: false, sharedStreamPlaces: false, nats: undefined, close: async () => undefined }
}
