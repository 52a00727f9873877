/**
 * A child process of the move, for the receipt store it moves into: libchdb serves one data
 * folder per process, and the move's own process holds the embedded one (DATA_DIR/clickhouse),
 * so the cluster recorder's folder is opened here. A ClickHouse server (CLICKHOUSE_URL) is
 * reached the same way, through the same store adapter, so both targets take one path.
 *
 * argv[2]: JSON `{ action: 'count' | 'load', target: ClickHouseTarget, file?: string, logFiles?: { [table]: string } }`:
 * `file` holds the receipts' rows, `logFiles` each receipt log table's (receipt-log/log-transfer.ts).
 * stdout: one JSON line, `{ receipts, leaves }` (held after the action) and for `load`
 * `{ rows }` plus, per receipt log table, the rows it wrote (`signed_requests`, ...).
 * Exit 0, or 1 with the error on stderr.
 */
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import { LOG_TABLES, loadLogRows, logLeafCount, type LogTable } from '../receipt-log/index.js'
import { ClickHouseReceiptStore, openClickHouse, type ClickHouseConnection, type ClickHouseTarget } from '../receipts/index.js'

/** Rows per insert: one part each, a few MB of JSON in memory. */
const LOAD_BATCH = 5_000

interface TargetJob {
  readonly action: 'count' | 'load'
  readonly target: ClickHouseTarget
  readonly file?: string
  readonly logFiles?: Partial<Record<LogTable, string>>
}

/** The parsed lines of an NDJSON file, LOAD_BATCH at a time. */
async function* batchesOf(file: string): AsyncIterable<Record<string, unknown>[]> {
  let batch: Record<string, unknown>[] = []
  for await (const line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) {
    if (line === '') continue
    batch.push(JSON.parse(line) as Record<string, unknown>)
    if (batch.length >= LOAD_BATCH) {
      yield batch
      batch = []
    }
  }
  if (batch.length > 0) yield batch
}

async function run(job: TargetJob): Promise<Record<string, number>> {
  const store = new ClickHouseReceiptStore({ target: job.target })
  // Opening migrates the schema: the target gets the tables this release writes.
  await store.open()
  let log: ClickHouseConnection | undefined
  try {
    log = await openClickHouse(job.target)
    const loaded: Record<string, number> = {}
    if (job.action === 'load') {
      if (job.file === undefined) throw new Error('load needs a file')
      let rows = 0
      for await (const batch of batchesOf(job.file)) {
        await store.loadRows(batch)
        rows += batch.length
      }
      loaded['rows'] = rows
      for (const table of Object.keys(LOG_TABLES) as LogTable[]) {
        const file = job.logFiles?.[table]
        if (file === undefined) continue
        let written = 0
        for await (const batch of batchesOf(file)) written += await loadLogRows(log, table, batch)
        loaded[table] = written
      }
    }
    return { receipts: await store.receiptCount(), leaves: await logLeafCount(log), ...loaded }
  } finally {
    await log?.close()
    await store.close()
  }
}

run(JSON.parse(process.argv[2] ?? '{}') as TargetJob).then(
  (result) => process.stdout.write(`${JSON.stringify(result)}\n`),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    process.exitCode = 1
  },
)
