import { execFile } from 'node:child_process'
import { rm } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ClickHouseReceiptStore, type ClickHouseTarget } from '../receipts/index.js'
import { replaceFileDurably } from '../storage/index.js'
import { MigrationError } from './migration-error.js'

/** Where the receipts wait between the two stores, in the embedded data folder; deleted once loaded. */
export const RECEIPTS_DUMP_FILE = 'cluster-migration-receipts.ndjson'

/** The receipt store of the cluster, in a child process (receipts-target.ts says why). */
export interface ReceiptTarget {
  /** Receipts it holds. */
  count(): Promise<number>
  /** Loads the rows of `file`; resolves with the rows loaded and the receipts held after. */
  load(file: string): Promise<{ readonly rows: number; readonly receipts: number }>
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
    count: async () => (await call({ action: 'count' })).receipts ?? 0,
    async load(file) {
      const r = await call({ action: 'load', file })
      return { rows: r.rows ?? 0, receipts: r.receipts ?? 0 }
    },
  }
}

/**
 * Every row of the embedded receipt store (DATA_DIR/clickhouse) into the cluster's: written
 * to a file in the data folder from this process, loaded by the target's child process.
 * Resolves with the receipts the data folder held and the cluster holds after.
 */
export async function copyReceipts(source: ClickHouseReceiptStore, dataDir: string, target: ReceiptTarget): Promise<{ readonly held: number; readonly rows: number; readonly receipts: number }> {
  const held = await source.receiptCount()
  const file = join(dataDir, RECEIPTS_DUMP_FILE)
  try {
    await replaceFileDurably(file, dataDir, source.storedRows(), 0o600)
  } catch (err) {
    throw new MigrationError('receipts_failed', `the data folder's receipts could not be read (${err instanceof Error ? err.message : String(err)})`, { cause: err })
  }
  const loaded = await target.load(file)
  await rm(file, { force: true })
  return { held, ...loaded }
}
