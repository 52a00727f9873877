import { execFile } from 'node:child_process'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { LOG_TABLES, storedLogRows, type LogTable } from '../receipt-log/index.js'
import type { ClickHouseConnection, ClickHouseReceiptStore, ClickHouseTarget } from '../receipts/index.js'
import { replaceFileDurably } from '../storage/index.js'
import { MigrationError } from './migration-error.js'

/** Where the receipts wait between the two stores, in the embedded data folder; deleted once loaded. */
export const RECEIPTS_DUMP_FILE = 'cluster-migration-receipts.ndjson'
/** Where each receipt log table's rows wait likewise. */
const logDumpFile = (table: LogTable) => `cluster-migration-${table}.ndjson`

/** The receipt log's rows written by a load, per table. */
export type LogRowsCopied = Readonly<Record<LogTable, number>>

/** The receipt store of the cluster, in a child process (receipts-target.ts says why). */
export interface ReceiptTarget {
  /** Receipts and receipt log leaves it holds. */
  count(): Promise<{ readonly receipts: number; readonly leaves: number }>
  /** Loads the receipts' rows of `file` and the receipt log's of `logFiles`; resolves with the rows loaded and the receipts and leaves held after. */
  load(file: string, logFiles: Readonly<Record<LogTable, string>>): Promise<{ readonly rows: number; readonly receipts: number; readonly leaves: number; readonly log: LogRowsCopied }>
}

export function receiptTarget(target: ClickHouseTarget): ReceiptTarget {
  // The child runs the same build (or the same loader, from source) as this process.
  const entry = fileURLToPath(new URL(`./receipts-target${import.meta.url.endsWith('.ts') ? '.ts' : '.js'}`, import.meta.url))
  const call = (job: Record<string, unknown>) =>
    new Promise<Record<string, number>>((resolve, reject) => {
      execFile(process.execPath, [...process.execArgv, entry, JSON.stringify({ ...job, target })], { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
        if (err !== null) reject(new MigrationError('receipts_failed', `the cluster's receipt store failed: ${stderr.trim() || err.message}`, { cause: err }))
        else resolve(JSON.parse(stdout.trim().split('\n').pop() ?? '{}') as Record<string, number>)
      })
    })
  return {
    async count() {
      const r = await call({ action: 'count' })
      return { receipts: r.receipts ?? 0, leaves: r.leaves ?? 0 }
    },
    async load(file, logFiles) {
      const r = await call({ action: 'load', file, logFiles })
      const log = Object.fromEntries((Object.keys(LOG_TABLES) as LogTable[]).map((t) => [t, r[t] ?? 0])) as Record<LogTable, number>
      return { rows: r.rows ?? 0, receipts: r.receipts ?? 0, leaves: r.leaves ?? 0, log }
    },
  }
}

/**
 * Every row of the embedded receipt store (DATA_DIR/clickhouse) into the cluster's, and
 * every row of the receipt log's tables (read on `sourceLog`, a connection to the same
 * store), so the cluster's sequencer rebuilds the same tree and signs on from the last
 * checkpoint published: written to files in the data folder from this process, loaded by
 * the target's child process. Resolves with the receipts the data folder held and the
 * cluster holds after, and the same of the log's leaves.
 */
export async function copyReceipts(
  source: ClickHouseReceiptStore,
  sourceLog: ClickHouseConnection,
  dataDir: string,
  target: ReceiptTarget,
): Promise<{ readonly held: number; readonly rows: number; readonly receipts: number; readonly leaves: number; readonly log: LogRowsCopied }> {
  const held = await source.receiptCount()
  const file = join(dataDir, RECEIPTS_DUMP_FILE)
  const logFiles = Object.fromEntries((Object.keys(LOG_TABLES) as LogTable[]).map((t) => [t, join(dataDir, logDumpFile(t))])) as Record<LogTable, string>
  try {
    await replaceFileDurably(file, dataDir, source.storedRows(), 0o600)
    // Signed requests hold the creators' bodies and signatures: as private as the receipts.
    for (const [table, path] of Object.entries(logFiles) as [LogTable, string][]) await replaceFileDurably(path, dataDir, storedLogRows(sourceLog, table), 0o600)
  } catch (err) {
    throw new MigrationError('receipts_failed', `the data folder's receipts could not be read (${err instanceof Error ? err.message : String(err)})`, { cause: err })
  }
  const loaded = await target.load(file, logFiles)
  for (const f of [file, ...Object.values(logFiles)]) await rm(f, { force: true })
  return { held, ...loaded }
}
