import { readdir, readFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import type { NatsConnection } from '@nats-io/transport-node'
import type { Logger } from 'pino'
import { connectNats, openEmbeddedBackends, type Backends } from '../backends/index.js'
import type { Config } from '../config/index.js'
import { openIngestCarryOver } from '../pipeline/index.js'
import { ClickHouseReceiptStore, openClickHouse, type ClickHouseConnection, type ClickHouseTarget } from '../receipts/index.js'
import { NONCE_WINDOW_MS } from '../schemas/index.js'
import { DataDirLockedError, lockDataDir, type DataDirLock } from '../service/data-dir-lock.js'
import { natsIngestOptions } from '../service/gateway-ingest-nats.js'
import { logOrigin, SEQUENCER_CONSUMER } from '../service/receipt-log-part.js'
import { RECORDER_CONSUMER } from '../service/recorder-part.js'
import { makeDir } from '../service/setup.js'
import { natsKvBuckets, type KvBucket } from '../storage/index.js'
import { copyBucket, type BucketCopy } from './kv-copy.js'
import { carryOverJournal, type CarriedOver } from './journal-carry-over.js'
import { MigrationError } from './migration-error.js'
import { readMarker, writeMarker } from './migration-marker.js'
import { LEFT_BEHIND, MOVED_BUCKETS } from './moved-buckets.js'
import { copyReceipts, receiptTarget, type LogRowsCopied, type ReceiptTarget } from './receipts-copy.js'
import { startStreamAfter, streamLastSeq } from './stream-start.js'

export interface MigrationOptions {
  /** The cluster's configuration, with DATA_DIR naming the embedded deployment's folder. */
  readonly config: Config
  /** Without CLICKHOUSE_URL: the DATA_DIR of the cluster's recorder, whose embedded engine takes the receipts. */
  readonly recorderDataDir?: string
  /** Finish a move that began and was interrupted, instead of refusing a cluster that holds state. */
  readonly resume: boolean
  readonly logger: Logger
}

export interface MigrationReport {
  readonly buckets: Readonly<Record<string, BucketCopy>>
  readonly journal: CarriedOver & { readonly lastSeq: number }
  readonly receipts: { readonly held: number; readonly rows: number; readonly receipts: number }
  /** The receipt log: the leaves the cluster holds after, the rows written per table, and the size of the last checkpoint moved. */
  readonly receiptLog: { readonly leaves: number; readonly rows: LogRowsCopied; readonly checkpointSize: number }
  /** The sequence the cluster's signal stream numbers its first record with. */
  readonly streamFirstSeq: number
  /** Set when ADMIN_TOKEN is not the token the embedded deployment kept in DATA_DIR/admin-token. */
  readonly adminTokenFile?: string
}

/**
 * Moves an embedded deployment's state (DATA_DIR) into a cluster (NATS_URL, and
 * CLICKHOUSE_URL or the recorder's folder): the key-value buckets, the accepted signals'
 * dedup entries and recent nonces, the receipts, the receipt log (its tables and its keys,
 * so the cluster's sequencer signs on from the last checkpoint published), and the signal
 * stream's numbering. The signal log's records themselves do not move: the embedded
 * recorder must have recorded every one (`recorder_behind` otherwise) and the receipt
 * log's sequencer logged every one (`receipt_log_behind`), so the receipts and the log
 * hold every accepted signal. The cluster must name the log as the embedded deployment
 * did (PUBLIC_BASE_URL; `log_origin_differs` otherwise): a checkpoint under another
 * origin would not verify against the log's published keys.
 * Refuses, writing nothing, while the embedded gateway runs or when the cluster holds
 * state; part-way failures are finished by running again with `resume`.
 */
export async function migrateToCluster(o: MigrationOptions): Promise<MigrationReport> {
  const { config, logger } = o
  if (config.NATS_URL === '') throw new MigrationError('invalid_options', 'NATS_URL is empty: set it to the cluster\'s NATS servers (and DATA_DIR to the embedded deployment\'s folder)')
  const dataDir = resolve(config.DATA_DIR)
  const target = receiptTargetOf(config, dataDir, o.recorderDataDir)
  const kvBuckets = await readdir(join(dataDir, 'kv')).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') throw new MigrationError('invalid_options', `DATA_DIR=${JSON.stringify(config.DATA_DIR)} holds no embedded deployment (no kv folder)`)
    throw err
  })
  const unknown = kvBuckets.filter((name) => !LEFT_BEHIND.has(name) && !MOVED_BUCKETS.some((b) => b.name === name))
  if (unknown.length > 0) throw new MigrationError('unknown_bucket', `DATA_DIR/kv holds buckets this release does not move (${unknown.join(', ')}): run the release that wrote them`)

  const locks: DataDirLock[] = []
  let backends: Backends | undefined
  let nc: NatsConnection | undefined
  let source: ClickHouseReceiptStore | undefined
  let sourceLog: ClickHouseConnection | undefined
  try {
    locks.push(await lock(dataDir, 'the embedded gateway still runs on DATA_DIR: stop it first'))
    if (target.kind === 'chdb') {
      await makeDir(target.recorderDir)
      locks.push(await lock(target.recorderDir, 'a process runs on the recorder\'s data folder: start the cluster\'s roles after the move'))
    }
    backends = await openEmbeddedBackends({
      config,
      logger,
      dataDir,
      failFatally: (err) => logger.error({ err }, 'the data folder failed while it was read'),
      time: (_step, run) => run(),
    })
    const log = backends.signalLog
    const info = await log.info()
    const recorded = (await log.consumerInfo(RECORDER_CONSUMER))?.ackSeq ?? 0
    if (recorded < info.lastSeq) {
      throw new MigrationError('recorder_behind', `the embedded recorder has recorded the journal up to seq ${recorded} of ${info.lastSeq}: start the embedded gateway again until its recorder lag is 0 (metric sgw_recorder_lag_records), stop it, then move`)
    }
    const logged = (await log.consumerInfo(SEQUENCER_CONSUMER))?.ackSeq ?? 0
    if (logged < info.lastSeq) {
      throw new MigrationError('receipt_log_behind', `the embedded receipt log's sequencer has logged the journal up to seq ${logged} of ${info.lastSeq}: start the embedded gateway again until GET /v1/log/checkpoint stops growing, stop it, then move`)
    }
    const sourceTarget: ClickHouseTarget = { kind: 'chdb', path: join(dataDir, 'clickhouse'), maxServerMemoryBytes: config.CLICKHOUSE_MAX_MEMORY_MB * 1024 * 1024 }
    source = new ClickHouseReceiptStore({ target: sourceTarget })
    await source.open()
    sourceLog = await openClickHouse(sourceTarget)
    const lastCheckpoint = await latestCheckpoint(sourceLog)
    const origin = logOrigin(config.PUBLIC_BASE_URL)
    if (lastCheckpoint !== undefined && lastCheckpoint.origin !== origin) {
      throw new MigrationError('log_origin_differs', `the embedded receipt log's checkpoints name the log ${JSON.stringify(lastCheckpoint.origin)}, the cluster would name it ${JSON.stringify(origin)}: set PUBLIC_BASE_URL as the embedded deployment had it`)
    }

    nc = await connectNats(config, 'migrate-to-cluster')
    const openTarget = natsKvBuckets(nc, { replicas: config.NATS_REPLICAS })
    const receipts = receiptTarget(target.store)
    const marker = await readMarker(dataDir)
    if (o.resume) {
      if (marker?.state !== 'copying') throw new MigrationError('no_move_to_resume', `no move from ${dataDir} is under way (${marker === undefined ? 'it never began' : 'the last one ended'}): run without --resume`)
    } else {
      await refuseHeldState(config, nc, openTarget, receipts, marker?.state === 'copying')
    }
    await writeMarker(dataDir, { state: 'copying', started_at: marker?.state === 'copying' ? marker.started_at : new Date().toISOString(), nats_url: config.NATS_URL })

    const buckets: Record<string, BucketCopy> = {}
    for (const { name, limits, leaves } of MOVED_BUCKETS) {
      const from = await backends.openBucket(name, limits(config))
      const to = await openTarget(name, limits(config))
      try {
        buckets[name] = await copyBucket(from, to, leaves)
      } finally {
        await Promise.all([from.close(), to.close()])
      }
    }
    const carry = await openIngestCarryOver(natsIngestOptions(config, nc, (message, err) => logger.warn({ err }, message)))
    const journal = { ...(await carryOverJournal(log, carry, NONCE_WINDOW_MS)), lastSeq: info.lastSeq }
    const { leaves, log: logRows, ...copied } = await copyReceipts(source, sourceLog, dataDir, receipts)
    const { firstSeq } = await startStreamAfter(nc, config, info.lastSeq)
    await writeMarker(dataDir, { state: 'done', started_at: marker?.started_at ?? new Date().toISOString(), nats_url: config.NATS_URL, finished_at: new Date().toISOString() })
    const adminTokenFile = await otherAdminToken(config, dataDir)
    return { buckets, journal, receipts: copied, receiptLog: { leaves, rows: logRows, checkpointSize: lastCheckpoint?.size ?? 0 }, streamFirstSeq: firstSeq, ...(adminTokenFile !== undefined && { adminTokenFile }) }
  } finally {
    await sourceLog?.close().catch(() => undefined)
    await source?.close().catch(() => undefined)
    await backends?.signalLog.close().catch(() => undefined)
    await nc?.drain().catch(() => undefined)
    for (const l of locks.reverse()) await l.release()
  }
}

type Target = { readonly kind: 'server'; readonly store: ClickHouseTarget } | { readonly kind: 'chdb'; readonly store: ClickHouseTarget; readonly recorderDir: string }

function receiptTargetOf(config: Config, dataDir: string, recorderDataDir: string | undefined): Target {
  if (config.CLICKHOUSE_URL !== '') return { kind: 'server', store: { kind: 'server', url: config.CLICKHOUSE_URL, requestTimeoutMs: config.CLICKHOUSE_TIMEOUT_MS } }
  if (recorderDataDir === undefined) throw new MigrationError('invalid_options', 'CLICKHOUSE_URL is empty: name the DATA_DIR of the cluster\'s recorder with --recorder-data-dir, whose embedded engine takes the receipts')
  const recorderDir = resolve(recorderDataDir)
  if (recorderDir === dataDir) throw new MigrationError('invalid_options', '--recorder-data-dir must be another folder than DATA_DIR: the cluster\'s recorder keeps its own')
  return { kind: 'chdb', recorderDir, store: { kind: 'chdb', path: join(recorderDir, 'clickhouse'), maxServerMemoryBytes: config.CLICKHOUSE_MAX_MEMORY_MB * 1024 * 1024 } }
}

async function lock(dir: string, why: string): Promise<DataDirLock> {
  try {
    return await lockDataDir(dir)
  } catch (err) {
    if (err instanceof DataDirLockedError) throw new MigrationError('data_dir_locked', `${why} (${err.message})`, { cause: err })
    throw err
  }
}

/** Refuses a cluster holding anything a move would write: it belongs to another deployment, or the cluster has already run. */
async function refuseHeldState(config: Config, nc: NatsConnection, openTarget: (name: string, limits: ReturnType<(typeof MOVED_BUCKETS)[number]['limits']>) => Promise<KvBucket>, receipts: ReceiptTarget, begun: boolean): Promise<void> {
  const held: string[] = []
  for (const { name, limits } of MOVED_BUCKETS) {
    const bucket = await openTarget(name, limits(config))
    const values = (await bucket.status()).values
    await bucket.close()
    if (values > 0) held.push(`bucket ${name}: ${values} entries`)
  }
  const lastSeq = await streamLastSeq(nc, config.NATS_STREAM)
  if (lastSeq > 0) held.push(`signal stream ${config.NATS_STREAM}: up to seq ${lastSeq}`)
  const count = await receipts.count()
  if (count.receipts > 0) held.push(`receipts: ${count.receipts}`)
  if (count.leaves > 0) held.push(`receipt log: ${count.leaves} leaves`)
  if (held.length === 0) return
  const hint = begun ? 'a move from this data folder began and did not end: run again with --resume to finish it' : 'a move goes into an empty cluster only; to move again, delete the cluster\'s streams, buckets and receipts first'
  throw new MigrationError('cluster_not_empty', `the cluster already holds state (${held.join('; ')}): ${hint}`)
}

/** The latest checkpoint the embedded deployment published: its size and the origin its note names (its first line). */
async function latestCheckpoint(conn: ClickHouseConnection): Promise<{ readonly size: number; readonly origin: string } | undefined> {
  const [row] = await (await conn.client.query({ query: 'SELECT size, note FROM receipt_log_checkpoints ORDER BY size DESC, created_at ASC LIMIT 1', format: 'JSONEachRow' })).json<{ size: number | string; note: string }>()
  return row === undefined ? undefined : { size: Number(row.size), origin: row.note.split('\n', 1)[0]! }
}

/** The embedded deployment's own admin token file, when the cluster's ADMIN_TOKEN is another token. */
async function otherAdminToken(config: Config, dataDir: string): Promise<string | undefined> {
  const file = join(dataDir, 'admin-token')
  const kept = await readFile(file, 'utf8').catch(() => undefined)
  return kept !== undefined && kept.trim() !== config.ADMIN_TOKEN ? file : undefined
}
