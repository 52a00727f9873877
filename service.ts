import { randomBytes } from 'node:crypto'
import { mkdir, readFile, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, isUsableAdminToken, parseTrustedProxies, type Config } from './config/index.js'
import { lockDataDir } from './data-dir-lock.js'
import { startGateway } from './gateway/index.js'
import { KvUsageMeter, MemoryReadRateLimiter } from './gateway/reads/index.js'
import { IngestErrorLog, IngestPipeline, openJournal, RetryNotes, scheduleStateSaves, SignalIdHistory, VerifyPool, type SignalLog } from './pipeline/index.js'
import { fileKvBuckets, replaceFileDurably } from './storage/index.js'
import { Registry, RegistryFile } from './registry/index.js'
import { ClickHouseReceiptStore, isReceiptStoreError, type ClickHouseTarget } from './receipts/index.js'
import { Recorder } from './recorder/index.js'
import { Rentals } from './rentals/index.js'
import { Webhooks, webhookBucketLimits } from './delivery/index.js'
import { LiveTail, MemoryTicketStore, StreamHub } from './delivery/index.js'
import { NONCE_WINDOW_MS } from './schemas/index.js'

export interface RunningService {
  readonly port: number
  readonly adminTokenFile: string | undefined
  /**
   * Settles with the error once the service cannot do its job without a restart: the
   * signal log failed a write or fsync. The caller stops the service and exits non-zero,
   * so the supervisor restarts it and recovery rebuilds from what reached the disk.
   */
  readonly fatal: Promise<Error>
  /** SIGTERM path: stop accepting, finish in-flight requests, flush the logs. */
  stop(): Promise<void>
}

/**
 * The most of the time the running saves of the ingest state may take: a save of d ms
 * puts the next one at least 20 d later.
 */
const STATE_SAVE_MAX_SHARE = 0.05

/** The admin token: from the environment, else the one kept in DATA_DIR, else a new one. */
async function adminToken(config: Config, dataDir: string): Promise<{ token: string; file: string | undefined }> {
  if (config.ADMIN_TOKEN !== '') return { token: config.ADMIN_TOKEN, file: undefined }
  const file = join(dataDir, 'admin-token')
  let kept: string | undefined
  try {
    kept = (await readFile(file, 'utf8')).trim()
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  if (kept !== undefined) {
    // An empty or edited file would otherwise become an admin token nobody can use, or anybody can guess.
    if (!isUsableAdminToken(kept)) throw new ConfigError(`${file} does not hold a usable admin token: delete it to have a new one generated, or set ADMIN_TOKEN`)
    return { token: kept, file }
  }
  const token = `sgw_admin_${randomBytes(32).toString('base64url')}`
  // Written whole or not at all (temporary file, fsync, rename), so a crash cannot leave it empty.
  await replaceFileDurably(file, dataDir, Buffer.from(`${token}\n`), 0o600)
  return { token, file }
}

/**
 * `mkdir -p`, one level at a time: Node's own recursive mkdir never settles for a path
 * under /proc (measured with Node 20), which would hang the start instead of failing it.
 */
async function makeDir(path: string): Promise<void> {
  try {
    await mkdir(path, { mode: 0o700 })
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'EEXIST') {
      if ((await stat(path)).isDirectory()) return
      throw err
    }
    if (code !== 'ENOENT' || dirname(path) === path) throw err
    await makeDir(dirname(path))
    await mkdir(path, { mode: 0o700 }).catch((again: NodeJS.ErrnoException) => {
      if (again.code !== 'EEXIST') throw again
    })
  }
}

/** Opens every backend of the embedded deployment and starts the gateway on top. */
export async function startService(config: Config, logger: Logger): Promise<RunningService> {
  const dataDir = resolve(config.DATA_DIR)
  await makeDir(dataDir).catch((err: NodeJS.ErrnoException) => {
    // Not a folder, or not one this user may write: restarting would not change that.
    throw new ConfigError(`DATA_DIR=${JSON.stringify(config.DATA_DIR)} cannot be used as the data folder (${err.code ?? err.message})`)
  })
  // Before anything in the folder is read or written: a second gateway on it would corrupt the journal.
  const lock = await lockDataDir(dataDir)
  try {
    const service = await startOnLockedDir(config, logger, dataDir)
    return { ...service, stop: () => service.stop().finally(() => lock.release()) }
  } catch (err) {
    await lock.release()
    throw err
  }
}

/** Times the start's steps for the start-up log line: each one, and the whole start so far. */
function stepTimer(): { time<T>(name: string, step: () => Promise<T>): Promise<T>; report(): Record<string, number> } {
  const started = performance.now()
  const ms: Record<string, number> = {}
  return {
    async time(name, step) {
      const t0 = performance.now()
      try {
        return await step()
      } finally {
        ms[name] = Math.round(performance.now() - t0)
      }
    },
    report: () => ({ ...ms, total: Math.round(performance.now() - started) }),
  }
}

async function startOnLockedDir(config: Config, logger: Logger, dataDir: string): Promise<RunningService> {
  // Start time grows with the state read back from disk; operators see where it went.
  const steps = stepTimer()
  const admin = await adminToken(config, dataDir)
  if (admin.file !== undefined) {
    // The operator needs this line whatever LOG_LEVEL hides: without it, no admin call can be made.
    if (logger.isLevelEnabled('info')) logger.info({ file: admin.file }, 'admin token is in this file')
    else process.stderr.write(`admin token is in ${admin.file}\n`)
  }

  const registry = await steps.time('registry', () => Registry.open(new RegistryFile(dataDir), admin.token))
  const dedupWindowMs = config.DEDUP_WINDOW_S * 1000
  const rateCeiling = { perSecond: config.INGEST_MAX_RATE_PER_S, burst: config.INGEST_MAX_BURST }
  // The pipeline's own dedup index decides before every append and is rebuilt from the
  // journal on start, so the journal keeps no second copy of the window in memory. The
  // dedup id is still written with each record, for consumers and the JetStream backend.
  const signalLog: SignalLog = await steps.time('journal', () =>
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
  let failed = false
  let reportFatal: (err: Error) => void = () => undefined
  const fatal = new Promise<Error>((resolve) => (reportFatal = resolve))
  // A part that cannot recover in place: stop reporting ready so traffic moves away, and
  // have the process restarted (exit 75), which starts it afresh.
  const failFatally = (err: Error, message: string) => {
    if (failed) return
    failed = true
    logger.fatal({ err }, message)
    reportFatal(err)
  }
  const pool = new VerifyPool({
    threads: config.VERIFY_THREADS,
    batchSize: config.VERIFY_BATCH,
    queueLimit: config.VERIFY_QUEUE_LIMIT,
    maxWaitMs: config.VERIFY_MAX_WAIT_MS,
    onError: (err, lost) => {
      const error = err instanceof Error ? err : new Error(String(err))
      if (lost) failFatally(error, 'every verify worker failed; stopping so that a restart starts them again')
      else logger.warn({ err }, 'a verify worker failed and was replaced')
    },
  })
  const history = await steps.time('signal_id_history', () =>
    SignalIdHistory.open({
      dir: join(dataDir, 'signal-ids'),
      maxEntries: config.SIGNAL_ID_HISTORY_MAX,
      log: signalLog,
      onWarning: (message, err) => logger.warn({ err }, message),
    }),
  )
  const retryNotes = await RetryNotes.open(join(dataDir, 'retries'), {
    keepMs: Math.max(NONCE_WINDOW_MS, dedupWindowMs),
    now: Date.now,
    onWriteError: (err) => logger.warn({ err }, 'retry note not written'),
  })
  const pipeline = new IngestPipeline({
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
    flagAfterMinutes: config.OVER_RATE_FLAG_MINUTES,
    rateCeiling,
    onWarning: (message, err) => logger.warn({ err }, message),
    // The journal refuses every append after a failed write or fsync (a retry could claim
    // durability that does not exist); a restart recovers it from the disk.
    onLogFailure: (err) => failFatally(err, 'signal log failed; stopping so that a restart recovers it'),
  })
  // Diagnostics only: never synced per record.
  const errors = await IngestErrorLog.open(join(dataDir, 'ingest-errors'), {
    perSource: config.INGEST_ERRORS_PER_SOURCE,
    maxUnverified: config.INGEST_ERRORS_UNVERIFIED_MAX,
    onWriteError: (err) => logger.warn({ err }, 'ingest error record not written'),
    onWarning: (message, err) => logger.warn({ err }, message),
  })

  // Shared state on the key-value port: files under DATA_DIR/kv here, NATS KV buckets in a cluster.
  const openBucket = fileKvBuckets({
    dir: join(dataDir, 'kv'),
    // A failed fsync: what reached the disk is unknown until the files are read again.
    onFailure: (err) => failFatally(err, 'a key-value bucket failed; stopping so that a restart reloads it from disk'),
    onWarning: (message, err) => logger.warn({ err }, message),
  })
  const rentalsBucket = await steps.time('rentals', () => openBucket('rentals', Rentals.bucketLimits(config.RENTALS_MAX)))
  const rentals = await Rentals.open({
    bucket: rentalsBucket,
    maxRentals: config.RENTALS_MAX,
    keepEndedMs: config.RENTALS_KEEP_ENDED_DAYS * 86_400_000,
    onWarning: (message, err) => logger.warn({ err }, message),
  })

  // Receipts: the embedded engine under DATA_DIR, or a ClickHouse server; the schema is migrated here.
  const receiptsTarget: ClickHouseTarget =
    config.CLICKHOUSE_URL === ''
      ? { kind: 'chdb', path: join(dataDir, 'clickhouse'), maxServerMemoryBytes: config.CLICKHOUSE_MAX_MEMORY_MB * 1024 * 1024 }
      : { kind: 'server', url: config.CLICKHOUSE_URL, requestTimeoutMs: config.CLICKHOUSE_TIMEOUT_MS }
  const receipts = new ClickHouseReceiptStore({ target: receiptsTarget })
  await steps.time('receipts', () =>
    receipts.open().catch((err: unknown) => {
      // ClickHouse down at start must not stop ingest: the log holds the signals and the
      // recorder opens the store when it answers. Any other failure (a newer schema) stops the start.
      if (!isReceiptStoreError(err) || !err.transient) throw err
      logger.warn({ err }, 'receipt store unavailable at start; ingest goes on and the recorder retries')
    }),
  )
  const recorder = new Recorder({
    log: signalLog,
    store: receipts,
    registry,
    lastSeq: () => pipeline.logLastSeq,
    logger,
    batchMax: config.RECORDER_BATCH,
    flushMs: config.RECORDER_FLUSH_MS,
    retryMaxMs: config.RECORDER_RETRY_MAX_MS,
  })
  // Rows exported per caller, on the key-value port like every shared counter.
  const usageBucket = await steps.time('usage', () => openBucket('usage', KvUsageMeter.bucketLimits))
  const usage = new KvUsageMeter(usageBucket, { onWarning: (message, err) => logger.warn({ err }, message) })

  // One tail of the log feeds every rental event stream and webhook of this process.
  const tail = await steps.time('delivery_tail', () => LiveTail.start(signalLog, (err) => logger.warn({ err }, 'delivery tail: reading the log failed; retrying')))
  // Renters' webhooks: endpoints, positions' retry state, attempts and dead letters on the key-value port.
  const webhooksBucket = await steps.time('webhooks', () => openBucket('webhooks', webhookBucketLimits(config.RENTALS_MAX)))
  const webhooks = await Webhooks.open({
    dataDir,
    bucket: webhooksBucket,
    log: signalLog,
    tail,
    rental: (id) => rentals.get(id),
    allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS === 'true',
    retryWindowMs: config.WEBHOOK_RETRY_WINDOW_S * 1000,
    retryFirstMs: config.WEBHOOK_RETRY_FIRST_MS,
    disableAfterMs: config.WEBHOOK_DISABLE_AFTER_S * 1000,
    maxConnections: config.WEBHOOK_CONCURRENCY,
    keyOverlapMs: config.DELIVERY_KEY_OVERLAP_S * 1000,
    onError: (err, rentalId) => logger.warn({ err, rental_id: rentalId }, 'webhook delivery loop failed; it starts again shortly'),
  })
  const hub = new StreamHub({ log: signalLog, tail, rentals, registry, maxPerRental: config.STREAM_MAX_PER_RENTAL, endSettleMs: config.STREAM_END_SETTLE_MS })

  const refused = await steps.time('refused_nonces', () => errors.load(Date.now() - NONCE_WINDOW_MS))

  // Listening before the rebuild, which takes seconds with a full dedup window: /healthz
  // answers meanwhile and ingest gets 503 not_ready until the nonces and dedup are back.
  let starting = true
  const gateway = await startGateway({
    host: config.HOST,
    port: config.PORT,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    bodyTimeoutMs: config.BODY_TIMEOUT_MS,
    maxSlowBodies: config.BODY_SLOW_MAX,
    trustedProxies: parseTrustedProxies(config.TRUSTED_PROXIES),
    rateCeiling,
    registry,
    rentals,
    receipts,
    webhooks,
    statusCacheMs: config.STATUS_CACHE_MS,
    recorder,
    reads: {
      limiter: new MemoryReadRateLimiter(config.READ_RATE_TRACKED_MAX),
      rates: { anonymousPerMin: config.READ_RATE_ANON_PER_MIN, tokenPerMin: config.READ_RATE_TOKEN_PER_MIN, rentalPerMin: config.READ_RATE_RENTAL_PER_MIN },
      exportsPerCaller: config.EXPORT_CONCURRENT_PER_PRINCIPAL,
      exportsMax: config.EXPORT_CONCURRENT_MAX,
      meter: usage,
    },
    streams: {
      hub,
      rentals,
      log: signalLog,
      tickets: new MemoryTicketStore(),
      ticketTtlMs: config.STREAM_TICKET_TTL_MS,
      heartbeatMs: config.STREAM_HEARTBEAT_MS,
      retryMs: config.STREAM_RETRY_MS,
      bufferBytes: config.STREAM_BUFFER_BYTES,
      endSettleMs: config.STREAM_END_SETTLE_MS,
    },
    pipeline,
    pool,
    errors,
    logger,
    isReady: () => !failed,
    isStarting: () => starting,
  })
  logger.info({ port: gateway.port, data_dir: dataDir }, 'gateway listening; signals wait for the state to be rebuilt')
  try {
    const rebuilt = await steps.time('dedup_and_nonces', () => pipeline.rebuild())
    for (const n of refused) pipeline.restoreNonce(n.sourceId, n.keyId, n.nonce, n.time)
    const retries = await steps.time('retry_notes', () => retryNotes.replay((note) => pipeline.restoreRetry(note)))
    logger.info(
      {
        from_snapshot: rebuilt.snapshot !== undefined,
        ...(rebuilt.snapshot && { snapshot_age_s: Math.round((Date.now() - rebuilt.snapshot.writtenAt) / 1000) }),
        restored_signals: rebuilt.restored,
        restored_retries: retries,
        dedup_entries: pipeline.dedupEntries,
        nonces: pipeline.liveNonces,
        ms: steps.report(),
        journal: await signalLog.info(),
      },
      rebuilt.snapshot === undefined ? 'state rebuilt from the journal' : 'state taken over from the last saved state, and the journal read after it',
    )
  } catch (err) {
    await gateway.drain(0)
    throw err
  }
  starting = false
  // After the rebuild, which reads the log the recorder's batches would compete with.
  recorder.start()
  const sweeper = setInterval(() => pipeline.sweep(), 5_000).unref()
  // Best-effort: without a saved state the next start rebuilds from the journal, only slower.
  const saves =
    config.INGEST_STATE_SAVE_S === 0
      ? undefined
      : scheduleStateSaves({
          intervalMs: config.INGEST_STATE_SAVE_S * 1000,
          maxShare: STATE_SAVE_MAX_SHARE,
          save: () => pipeline.saveState(),
          onSaved: (saved, ms) =>
            logger.info({ bytes: saved.bytes, log_seq: saved.mark?.seq, dedup_entries: saved.dedupEntries, nonces: saved.nonces, ms: Math.round(ms) }, 'ingest state saved'),
          onFailed: (err) => logger.warn({ err }, 'ingest state not saved; a start after a crash reads more of the journal'),
        })
  logger.info({ port: gateway.port, data_dir: dataDir, verify_threads: pool.threads, fsync: config.JOURNAL_FSYNC }, 'gateway ready')

  const saveState = async (mark: Awaited<ReturnType<IngestPipeline['logMark']>>) => {
    const t0 = performance.now()
    try {
      const saved = await pipeline.saveState(mark)
      logger.info({ bytes: saved?.bytes, dedup_entries: saved?.dedupEntries, nonces: saved?.nonces, ms: Math.round(performance.now() - t0) }, 'ingest state saved for the next start')
    } catch (err) {
      logger.warn({ err }, 'ingest state not saved; the next start rebuilds it from the journal')
    }
  }
  let stopping: Promise<void> | undefined
  return {
    port: gateway.port,
    adminTokenFile: admin.file,
    fatal,
    stop: () =>
      (stopping ??= (async () => {
        await gateway.drain(config.SHUTDOWN_GRACE_MS)
        clearInterval(sweeper)
        // A save under way finishes first: it reads the log, which closes below.
        await saves?.stop()
        await pool.close()
        await registry.settle()
        // Its batch in flight written and acknowledged, before the log and the store close.
        await recorder.close().catch((err: unknown) => logger.warn({ err }, 'recorder did not stop cleanly; its last batch is recorded again at the next start'))
        await webhooks.close()
        hub.close()
        await tail.close()
        await rentals.close()
        // Nothing appends any more: the state to be taken over covers the log up to here.
        const mark = failed ? undefined : await pipeline.logMark().catch((err: unknown) => logger.warn({ err }, 'ingest state not saved: the log end is unreadable'))
        // Each is closed even if one before it fails; the first failure is reported.
        let failure: unknown
        for (const close of [() => signalLog.close(), () => errors.close(), () => retryNotes.close(), () => history.close(), () => rentalsBucket.close(), () => usage.close(), () => usageBucket.close(), () => receipts.close()]) {
          await close().catch((err: unknown) => (failure ??= err))
        }
        if (failure !== undefined) throw failure
        // Only after the log closed cleanly: the next start trusts the snapshot up to the mark.
        if (mark !== undefined) await saveState(mark)
      })()),
  }
}
