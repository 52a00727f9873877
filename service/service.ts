import { resolve } from 'node:path'
import type { Logger } from 'pino'
import { ConfigError, parseTrustedProxies, type Config, type Role } from '../config/index.js'
import { lockDataDir } from './data-dir-lock.js'
import { startGateway } from '../gateway/index.js'
import { openBackends } from '../backends/index.js'
import { migrateLegacyRegistry, Registry } from '../registry/index.js'
import { Rentals } from '../rentals/index.js'
import { openDeliveryPart } from './delivery-part.js'
import { openGatewayPart } from './gateway-part.js'
import { openReceiptLogPart } from './receipt-log-part.js'
import { openReceiptReadsPart } from './receipt-reads-part.js'
import { createRecorder, openReceiptStore, openRecorderLease } from './recorder-part.js'
import { adminToken, followLogEnd, makeDir, stepTimer, type ServiceCore } from './setup.js'

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

/** The parts each ROLE runs (docs/operations.md, Roles). */
const ROLE_PARTS: Record<Role, { readonly gateway: boolean; readonly recorder: boolean; readonly delivery: boolean }> = {
  all: { gateway: true, recorder: true, delivery: true },
  gateway: { gateway: true, recorder: false, delivery: false },
  recorder: { gateway: false, recorder: true, delivery: false },
  delivery: { gateway: false, recorder: false, delivery: true },
}

/** Opens the backends (embedded, or NATS with NATS_URL) and the parts ROLE needs and starts its parts, with the HTTP edge on top. */
export async function startService(config: Config, logger: Logger): Promise<RunningService> {
  const dataDir = resolve(config.DATA_DIR)
  await makeDir(dataDir).catch((err: NodeJS.ErrnoException) => {
    // Not a folder, or not one this user may write: restarting would not change that.
    throw new ConfigError(`DATA_DIR=${JSON.stringify(config.DATA_DIR)} cannot be used as the data folder (${err.code ?? err.message})`)
  })
  // Before anything in the folder is read or written: a second process on it would corrupt
  // the journal. Every role takes it, since the embedded backends serve one process.
  const lock = await lockDataDir(dataDir)
  try {
    const service = await startOnLockedDir(config, logger, dataDir)
    return { ...service, stop: () => service.stop().finally(() => lock.release()) }
  } catch (err) {
    await lock.release()
    throw err
  }
}

async function startOnLockedDir(config: Config, logger: Logger, dataDir: string): Promise<RunningService> {
  const role = config.ROLE
  const runs = ROLE_PARTS[role]
  // Loaded only when on: the tracing SDK and its exporter stay out of a process without it.
  const tracing = config.OTEL_EXPORTER_OTLP_ENDPOINT === '' ? undefined : (await import('../tracing/tracing-setup.js')).startTracing(config, logger)
  // Start time grows with the state read back from disk; operators see where it went.
  const steps = stepTimer()
  const admin = await adminToken(config, dataDir)
  if (admin.file !== undefined) {
    // The operator needs this line whatever LOG_LEVEL hides: without it, no admin call can be made.
    if (logger.isLevelEnabled('info')) logger.info({ file: admin.file }, 'admin token is in this file')
    else process.stderr.write(`admin token is in ${admin.file}\n`)
  }

  let failFatally: ServiceCore['failFatally'] = () => undefined
  // The journal and file buckets under DATA_DIR, or JetStream and NATS KV (NATS_URL).
  const backends = await openBackends({ config, logger, dataDir, time: (step, run) => steps.time(step, run), failFatally: (err, message) => failFatally(err, message) })
  const { signalLog, openBucket } = backends
  // Every role authenticates its callers against the registry; the recorder also follows its disputes.
  const registryBucket = await openBucket('registry', Registry.bucketLimits())
  const registry = await steps.time('registry', async () => {
    // Registry files of an older release are copied into the bucket once, then renamed.
    const migrated = await migrateLegacyRegistry(dataDir, registryBucket)
    if (migrated !== undefined) logger.info({ entries: migrated }, 'registry files copied into the registry bucket and renamed *.migrated')
    return Registry.open(registryBucket, admin.token, { onWarning: (message, err) => logger.warn({ err }, message) })
  })
  let failed = false
  let reportFatal: (err: Error) => void = () => undefined
  const fatal = new Promise<Error>((resolve) => (reportFatal = resolve))
  const core: ServiceCore = {
    config,
    logger,
    dataDir,
    steps,
    registry,
    signalLog,
    openBucket,
    backends,
    // Stop reporting ready so traffic moves away, and have the process restarted (exit 75), which starts it afresh.
    failFatally: (err, message) => {
      if (failed) return
      failed = true
      logger.fatal({ err }, message)
      reportFatal(err)
    },
  }
  failFatally = core.failFatally

  // Where the receipt routes are served: with the gateway on the embedded backends (one
  // receipt store for the one process), and on NATS with the recorder, the one writer of
  // an embedded receipt store, or with every gateway when the store is a ClickHouse server.
  const receiptsHere = backends.kind === 'embedded' ? runs.gateway : runs.recorder || (runs.gateway && config.CLICKHOUSE_URL !== '')
  // Rentals: the control plane makes and ends them, delivery follows them through the bucket's watch, receipt reads check renters against them.
  const rentalsBucket = runs.gateway || runs.delivery || receiptsHere ? await steps.time('rentals', () => core.openBucket('rentals', Rentals.bucketLimits(config.RENTALS_MAX))) : undefined
  const rentals =
    rentalsBucket &&
    (await Rentals.open({
      bucket: rentalsBucket,
      maxRentals: config.RENTALS_MAX,
      keepEndedMs: config.RENTALS_KEEP_ENDED_DAYS * 86_400_000,
      onWarning: (message, err) => logger.warn({ err }, message),
    }))
  // Receipts: written by the recorder, read where receiptsHere says.
  const receipts = receiptsHere || runs.recorder ? await openReceiptStore(core) : undefined
  const receiptReads = receiptsHere && receipts && rentals ? await openReceiptReadsPart(core, receipts, rentals) : undefined
  const gatewayPart = runs.gateway && rentals ? await openGatewayPart(core, rentals) : undefined
  // Without ingest here, the log's end is asked of the log (in a cluster, others append).
  const logEnd = gatewayPart === undefined ? await followLogEnd(signalLog, 1000, (err) => logger.warn({ err }, 'signal log: its end could not be read')) : undefined
  const logLastSeq = logEnd?.lastSeq ?? (() => gatewayPart?.api.pipeline.logLastSeq ?? 0)
  // On NATS the recorder's consumer is leased: with receipts under DATA_DIR it is taken
  // before listening, and a second recorder of the cluster is refused here, naming the
  // first; with receipts on a ClickHouse server every recorder starts, one pulls, the
  // others wait as standbys (recorder-part.ts). The receipt log (read where receipts are,
  // sequenced where the recorder runs) is opened beside it with its own lease in the same
  // mode: after a kill -9 each waits for its own lease to lapse, at the same time.
  const leaseMode = config.CLICKHOUSE_URL === '' ? 'refuse' : 'wait'
  const openingLog = receipts ? openReceiptLogPart(core, receipts, { serve: receiptReads !== undefined, sequence: runs.recorder, leased: backends.leasedRecorder, leaseMode }) : undefined
  const [recorderLease, receiptLog] = await Promise.all([runs.recorder && backends.leasedRecorder ? openRecorderLease(core, leaseMode) : undefined, openingLog])
  const recorder = runs.recorder && receipts ? createRecorder(core, receipts, logLastSeq, recorderLease) : undefined
  const delivery = runs.delivery && rentals ? await openDeliveryPart(core, rentals) : undefined

  // Listening before the rebuild, which takes seconds with a full dedup window: /healthz
  // answers meanwhile and ingest gets 503 not_ready until the nonces and dedup are back.
  let starting = gatewayPart !== undefined
  const gateway = await startGateway({
    host: config.HOST,
    port: config.PORT,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    bodyTimeoutMs: config.BODY_TIMEOUT_MS,
    maxSlowBodies: config.BODY_SLOW_MAX,
    trustedProxies: parseTrustedProxies(config.TRUSTED_PROXIES),
    role,
    registry,
    ...(gatewayPart && { api: gatewayPart.api }),
    ...(receiptReads && { receiptRoutes: { ...receiptReads.routes, ...(receiptLog?.routes && { log: receiptLog.routes }) } }),
    receiptsServedBy: backends.kind === 'embedded' ? 'gateway' : 'recorder',
    ...(delivery && { delivery: delivery.routes }),
    ...(recorder && { recorder }),
    logLastSeq,
    logger,
    isReady: () => !failed,
    isStarting: () => starting,
  })
  logger.info({ port: gateway.port, data_dir: dataDir }, starting ? 'gateway listening; signals wait for the state to be rebuilt' : 'gateway listening')
  try {
    await gatewayPart?.rebuild()
  } catch (err) {
    await gateway.drain(0)
    throw err
  }
  starting = false
  // After the rebuild, which reads the log the recorder's batches would compete with.
  recorder?.start()
  receiptLog?.start()
  gatewayPart?.run()
  logger.info(
    {
      port: gateway.port,
      data_dir: dataDir,
      ...(gatewayPart && { verify_threads: gatewayPart.api.pool.threads }),
      fsync: config.JOURNAL_FSYNC,
      ...(gatewayPart === undefined && { ms: steps.report() }),
    },
    'gateway ready',
  )

  let stopping: Promise<void> | undefined
  return {
    port: gateway.port,
    adminTokenFile: admin.file,
    fatal,
    stop: () =>
      (stopping ??= (async () => {
        await gateway.drain(config.SHUTDOWN_GRACE_MS)
        await gatewayPart?.stop(failed)
        await registry.settle()
        // Its batch in flight written and acknowledged, before the log and the store close.
        await recorder?.close().catch((err: unknown) => logger.warn({ err }, 'recorder did not stop cleanly; its last batch is recorded again at the next start'))
        await recorderLease?.close().catch((err: unknown) => logger.warn({ err }, 'recorder lease not released; another recorder takes it when it lapses'))
        await receiptLog?.close().catch((err: unknown) => logger.warn({ err }, 'receipt log did not stop cleanly; its last batch is logged again at the next start'))
        // Each is closed even if one before it fails; the first failure is reported.
        let failure: unknown
        await delivery?.close().catch((err: unknown) => (failure ??= err))
        await receiptReads?.close().catch((err: unknown) => (failure ??= err))
        logEnd?.stop()
        await rentals?.close()
        await registry.close()
        for (const close of [() => signalLog.close(), async () => rentalsBucket?.close(), () => registryBucket.close(), async () => receipts?.close()]) {
          await close().catch((err: unknown) => (failure ??= err))
        }
        // Saves the ingest state for the next start only if the log closed cleanly.
        await gatewayPart?.close(failure === undefined).catch((err: unknown) => (failure ??= err))
        await backends.close().catch((err: unknown) => (failure ??= err))
        // Last: the spans of the stop itself go out too.
        await tracing?.shutdown()
        if (failure !== undefined) throw failure
      })()),
  }
}
