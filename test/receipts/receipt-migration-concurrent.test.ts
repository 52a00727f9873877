import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient, type ClickHouseClient } from '@clickhouse/client'
import t, { type Test } from 'tap'
import { ClickHouseReceiptStore, receiptIdOf, type MigrationLock } from '../../receipts/index.js'
import { MIGRATIONS } from '../../receipts/migrations/index.js'
import { receiptsTable } from '../../receipts/migrations/001-receipts.js'
import { RECEIPTS_INDEX_GRANULARITY } from '../../receipts/migrations/002-receipt-lookups.js'
import { fileKvBuckets, takeLeaseLock } from '../../storage/index.js'
import { receiptInput } from '../helpers/receipts.js'
import { standInDatabaseUrl } from '../helpers/receipts-server.js'

/**
 * Three processes starting at once on one ClickHouse server (the stand-in, over HTTP),
 * each migrating under the lock the service takes on the key-value port: the schema ends
 * complete, each version is recorded once, and the receipts of an older schema survive
 * the table rebuild.
 */
const dir = await mkdtemp(join(tmpdir(), 'sgw-migrate-'))
t.teardown(() => rm(dir, { recursive: true, force: true }))
const leases = await (fileKvBuckets({ dir }))('leases', { maxKeys: 16, maxValueBytes: 1024 })
t.teardown(() => leases.close())
const lock = (holderId: string): MigrationLock => () => takeLeaseLock({ bucket: leases, key: 'lease.receipts.migrate', holderId, leaseMs: 15_000 })

async function startThree(url: string): Promise<ClickHouseReceiptStore[]> {
  const stores = ['a', 'b', 'c'].map((p) => new ClickHouseReceiptStore({ target: { kind: 'server', url, requestTimeoutMs: 60_000 }, migrationLock: lock(p) }))
  t.teardown(() => Promise.all(stores.map((s) => s.close())))
  await Promise.all(stores.map((s) => s.open()))
  return stores
}

const rowsOf = async <T>(client: ClickHouseClient, query: string) => (await client.query({ query, format: 'JSONEachRow' })).json<T>()

async function checkSchema(t: Test, client: ClickHouseClient): Promise<void> {
  const versions = await rowsOf<{ version: number; n: number | string }>(client, 'SELECT version, count() AS n FROM schema_migrations GROUP BY version ORDER BY version')
  t.same(versions.map((v) => [v.version, Number(v.n)]), MIGRATIONS.map((m) => [m.version, 1]), 'each version recorded once, by one process')
  const tables = await rowsOf<{ name: string; engine_full: string }>(client, `SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() ORDER BY name`)
  t.same(tables.map((r) => r.name), ['receipt_ids', 'receipt_ids_recorded', 'receipt_log_checkpoints', 'receipt_log_entries', 'receipts', 'schema_migrations', 'signed_requests'], 'every table once, no copy left over')
  t.match(tables.find((r) => r.name === 'receipts')?.engine_full, `index_granularity = ${RECEIPTS_INDEX_GRANULARITY}`, 'the receipts rebuilt with small granules')
}

t.test('three stores opened at once on a fresh server: one schema, each version once', async (t) => {
  const url = await standInDatabaseUrl('fresh')
  const stores = await startThree(url)
  const client = createClient({ url })
  t.teardown(() => client.close())
  await checkSchema(t, client)
  // Each of them records and reads: the schema is whole for all.
  await stores[0]!.record([receiptInput(1, { source_id: 'fresh' })])
  t.equal((await stores[2]!.list({ source_id: 'fresh' })).receipts.length, 1)
})

t.test('three stores migrating an older schema at once: the rebuild runs once and keeps every receipt', async (t) => {
  const url = await standInDatabaseUrl('older')
  const old = new ClickHouseReceiptStore({ target: { kind: 'server', url, requestTimeoutMs: 60_000 }, migrations: [receiptsTable] })
  await old.open()
  await old.close()
  const client = createClient({ url })
  t.teardown(() => client.close())
  // The rows the first release's recorder wrote.
  const batch = Array.from({ length: 300 }, (_, n) => receiptInput(n, { source_id: `o-${n % 3}` }))
  await client.insert({ table: 'receipts', values: batch.map((r) => ({ ...r, receipt_id: receiptIdOf(r.source_id, r.signal_id), emitted_at: Date.parse(r.emitted_at), received_at: Date.parse(r.received_at), recorded_at: Date.now() })), format: 'JSONEachRow' })
  const stores = await startThree(url)
  await checkSchema(t, client)
  const [counts] = await rowsOf<{ n: number | string; ids: number | string }>(client, `SELECT (SELECT count() FROM receipts FINAL WHERE signal_id != '') AS n, (SELECT uniqExact(receipt_id) FROM receipt_ids) AS ids`)
  t.same([Number(counts?.n), Number(counts?.ids)], [300, 300], 'every receipt kept, and listed in the look-up')
  t.same(await stores[1]!.record(batch.slice(0, 10)), { recorded: 0, alreadyRecorded: 10 })
})
