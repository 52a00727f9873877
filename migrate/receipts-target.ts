/**
 * A child process of the move, for the receipt store it moves into: libchdb serves one data
 * folder per process, and the move's own process holds the embedded one (DATA_DIR/clickhouse),
 * so the cluster recorder's folder is opened here. A ClickHouse server (CLICKHOUSE_URL) is
 * reached the same way, through the same store adapter, so both targets take one path.
 *
 * argv[2]: JSON `{ action: 'count' | 'load', target: ClickHouseTarget, file?: string }`.
 * stdout: one JSON line, `{ receipts }` (held after the action) and for `load` `{ rows }`.
 * Exit 0, or 1 with the error on stderr.
 */
import { createReadStream } from 'node:fs'
import { createInterface } from 'node:readline'
import { ClickHouseReceiptStore, type ClickHouseTarget } from '../receipts/index.js'

/** Rows per insert: one part each, a few MB of JSON in memory. */
const LOAD_BATCH = 5_000

interface TargetJob {
  readonly action: 'count' | 'load'
  readonly target: ClickHouseTarget
  readonly file?: string
}

async function run(job: TargetJob): Promise<Record<string, number>> {
  const store = new ClickHouseReceiptStore({ target: job.target })
  // Opening migrates the schema: the target gets the tables this release writes.
  await store.open()
  try {
    let rows = 0
    if (job.action === 'load') {
      if (job.file === undefined) throw new Error('load needs a file')
      let batch: Record<string, unknown>[] = []
      for await (const line of createInterface({ input: createReadStream(job.file), crlfDelay: Infinity })) {
        if (line === '') continue
        batch.push(JSON.parse(line) as Record<string, unknown>)
        if (batch.length >= LOAD_BATCH) {
          await store.loadRows(batch)
          rows += batch.length
          batch = []
        }
      }
      await store.loadRows(batch)
      rows += batch.length
    }
    return { receipts: await store.receiptCount(), ...(job.action === 'load' && { rows }) }
  } finally {
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
