import { join } from 'node:path'
import { composeEmbeddedIngest, EmbeddedRefusalHistory, RetryNotes, scheduleStateSaves, SignalIdHistory } from '../pipeline/index.js'
import { NONCE_WINDOW_MS } from '../schemas/index.js'
import type { GatewayIngest, GatewayIngestInput } from './gateway-ingest.js'
import type { ServiceCore } from './setup.js'

/**
 * The most of the time the running saves of the ingest state may take: a save of d ms
 * puts the next one at least 20 d later.
 */
const STATE_SAVE_MAX_SHARE = 0.05

/** The ingest state of one process, in memory and under DATA_DIR: rebuilt from the journal, saved at close. */
export async function openEmbeddedGatewayIngest(core: ServiceCore, { pool, rateCeiling }: GatewayIngestInput): Promise<GatewayIngest> {
  const { config, logger, dataDir, steps, signalLog, registry } = core
  const warn = (message: string, err: unknown) => logger.warn({ err }, message)
  const dedupWindowMs = config.DEDUP_WINDOW_S * 1000
  const history = await steps.time('signal_id_history', () =>
    SignalIdHistory.open({ dir: join(dataDir, 'signal-ids'), maxEntries: config.SIGNAL_ID_HISTORY_MAX, log: signalLog, onWarning: warn }),
  )
  const retryNotes = await RetryNotes.open(join(dataDir, 'retries'), {
    keepMs: Math.max(NONCE_WINDOW_MS, dedupWindowMs),
    now: Date.now,
    onWriteError: (err) => logger.warn({ err }, 'retry note not written'),
  })
  // Diagnostics only: never synced per record. Read before ingest starts: the nonces its
  // refused requests claimed stay spent after the restart.
  const errors = await steps.time('refused_nonces', () =>
    EmbeddedRefusalHistory.open(join(dataDir, 'ingest-errors'), {
      perSource: config.INGEST_ERRORS_PER_SOURCE,
      maxUnverified: config.INGEST_ERRORS_UNVERIFIED_MAX,
      nonceSinceMs: Date.now() - NONCE_WINDOW_MS,
      onWriteError: (err) => logger.warn({ err }, 'ingest error record not written'),
      onWarning: warn,
    }),
  )
  // The embedded signal index decides before every append and is rebuilt from the
  // journal on start, so the journal keeps no second copy of the window in memory.
  const ingest = composeEmbeddedIngest({
    log: signalLog,
    pool,
    registry,
    now: Date.now,
    nonceWindowMs: NONCE_WINDOW_MS,
    maxLiveNonces: config.NONCE_STORE_MAX,
    maxDedupEntries: config.DEDUP_STORE_MAX,
    appendQueueLimit: config.JOURNAL_QUEUE_LIMIT,
    dedupWindowMs,
    history,
    stateFile: join(dataDir, 'ingest-state.bin'),
    retryNotes,
    refusals: errors,
    flagAfterMinutes: config.OVER_RATE_FLAG_MINUTES,
    rateCeiling,
    onWarning: warn,
    // The journal refuses every append after a failed write or fsync (a retry could claim
    // durability that does not exist); a restart recovers it from the disk.
    onLogFailure: (err) => core.failFatally(err, 'signal log failed; stopping so that a restart recovers it'),
  })
  const { state } = ingest
  let sweeper: NodeJS.Timeout | undefined
  let saves: ReturnType<typeof scheduleStateSaves> | undefined
  let mark: Awaited<ReturnType<typeof state.logMark>> | undefined
  return {
    pipeline: ingest.pipeline,
    errors,
    revocations: ingest.ports.revocations,
    async rebuild() {
      const recovered = await ingest.recover((step, run) => steps.time(step, run))
      logger.info(
        {
          from_snapshot: recovered.snapshot !== undefined,
          ...(recovered.snapshot && { snapshot_age_s: Math.round((Date.now() - recovered.snapshot.writtenAt) / 1000) }),
          restored_signals: recovered.restored,
          restored_retries: recovered.retries,
          dedup_entries: recovered.dedupEntries,
          nonces: recovered.nonces,
          ms: steps.report(),
          journal: await signalLog.info(),
        },
        recovered.snapshot === undefined ? 'state rebuilt from the journal' : 'state taken over from the last saved state, and the journal read after it',
      )
    },
    run() {
      sweeper = setInterval(() => state.sweep(), 5_000).unref()
      // Best-effort: without a saved state the next start rebuilds from the journal, only slower.
      if (config.INGEST_STATE_SAVE_S === 0) return
      saves = scheduleStateSaves({
        intervalMs: config.INGEST_STATE_SAVE_S * 1000,
        maxShare: STATE_SAVE_MAX_SHARE,
        save: () => state.saveState(),
        onSaved: (saved, ms) => logger.info({ bytes: saved.bytes, log_seq: saved.mark?.seq, dedup_entries: saved.dedupEntries, nonces: saved.nonces, ms: Math.round(ms) }, 'ingest state saved'),
        onFailed: (err) => logger.warn({ err }, 'ingest state not saved; a start after a crash reads more of the journal'),
      })
    },
    async stop(failed) {
      clearInterval(sweeper)
      // A save under way finishes first: it reads the log, which closes after this.
      await saves?.stop()
      // Nothing appends any more: the state to be taken over covers the log up to here.
      if (failed) return
      mark = await state.logMark().catch((err: unknown) => {
        logger.warn({ err }, 'ingest state not saved: the log end is unreadable')
        return undefined
      })
    },
    async close(logClosed) {
      let failure: unknown
      for (const close of [() => errors.close(), () => retryNotes.close(), () => history.close()]) {
        await close().catch((err: unknown) => (failure ??= err))
      }
      if (failure !== undefined) throw failure
      // Only after the log closed cleanly: the next start trusts the snapshot up to the mark.
      if (!logClosed || mark === undefined) return
      const t0 = performance.now()
      try {
        const saved = await state.saveState(mark)
        logger.info({ bytes: saved?.bytes, dedup_entries: saved?.dedupEntries, nonces: saved?.nonces, ms: Math.round(performance.now() - t0) }, 'ingest state saved for the next start')
      } catch (err) {
        logger.warn({ err }, 'ingest state not saved; the next start rebuilds it from the journal')
      }
    },
  }
}
