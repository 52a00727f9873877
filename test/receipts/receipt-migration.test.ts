import { createClient } from '@clickhouse/client'
import { createRequire } from 'node:module'
import t from 'tap'
import { ClickHouseReceiptStore, receiptIdOf } from '../../receipts/index.js'
import { receiptsTable } from '../../receipts/migrations/001-receipts.js'
import { RECEIPTS_INDEX_GRANULARITY } from '../../receipts/migrations/002-receipt-lookups.js'
import { chdbFolder, receiptInput } from '../helpers/receipts.js'

const require = createRequire(import.meta.url)
const folder = await chdbFolder(t)

t.test('a store of the first schema is migrated with its receipts: rebuilt with small granules, every receipt in the id look-up', async (t) => {
  const old = new ClickHouseReceiptStore({ target: { kind: 'chdb', path: folder.path, maxServerMemoryBytes: 1e9 }, migrations: [receiptsTable] })
  await old.open()
  await old.close()
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path: folder.path }) as never })
  t.teardown(() => client.close())
  // The rows the first release's recorder wrote (its code is gone, its rows are not).
  const batch = Array.from({ length: 50 }, (_, n) => receiptInput(n, { source_id: `m-${n % 3}` }))
  const rows = batch.map((r) => ({ ...r, receipt_id: receiptIdOf(r.source_id, r.signal_id), emitted_at: Date.parse(r.emitted_at), received_at: Date.parse(r.received_at), recorded_at: Date.now() }))
  await client.insert({ table: 'receipts', values: rows, format: 'JSONEachRow' })

  const store = await folder.open()
  const [table] = await (await client.query({ query: `SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'receipts'`, format: 'JSONEachRow' })).json<{ engine_full: string }>()
  t.match(table?.engine_full, `index_granularity = ${RECEIPTS_INDEX_GRANULARITY}`)
  const [ids] = await (await client.query({ query: 'SELECT count() AS n, uniqExact(receipt_id) AS u FROM receipt_ids', format: 'JSONEachRow' })).json<{ n: number; u: number }>()
  t.same([Number(ids?.n), Number(ids?.u)], [50, 50], 'every receipt listed once')
  const tables = await (await client.query({ query: `SELECT name FROM system.tables WHERE database = currentDatabase() AND name LIKE 'receipts%' ORDER BY name`, format: 'JSONEachRow' })).json<{ name: string }>()
  t.same(tables.map((r) => r.name), ['receipts'], 'the copy is gone')

  // The migrated receipts are still recorded once, and a reuse of their signal_ids is refused.
  t.same(await store.record(batch), { recorded: 0, alreadyRecorded: 50 })
  t.same(await store.record([receiptInput(7, { source_id: 'm-1', emitted_at: '2025-06-01T00:00:00.000Z', received_at: '2025-06-01T00:00:00.100Z' })]), { recorded: 0, alreadyRecorded: 1 })
  const listed = []
  let cursor: string | undefined
  do {
    const page = await store.list({ source_id: 'm-1', limit: 7, ...(cursor ? { cursor } : {}) })
    listed.push(...page.receipts.map((r) => r.signal_id))
    cursor = page.next_cursor
  } while (cursor !== undefined)
  t.same(listed, batch.filter((b) => b.source_id === 'm-1').map((b) => b.signal_id).reverse())
})

t.test('new receipts enter the id look-up in the same insert, scoring rows do not', async (t) => {
  const store = await folder.open()
  await store.record([receiptInput(1, { source_id: 'fresh' })])
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path: folder.path }) as never })
  t.teardown(() => client.close())
  const page = await store.list({ source_id: 'fresh' })
  const id = page.receipts[0]!.receipt_id
  t.same((await store.recordOutcomes([{ receipt_id: id, window_start: '2025-01-01T00:00:00.000Z', window_end: '2025-01-01T01:00:00.000Z', baseline: 1, outcome: 'hit', scored_at: '2025-01-01T02:00:00.000Z' }])).accepted, 1)
  const rows = await (await client.query({ query: `SELECT count() AS n FROM receipt_ids WHERE source_id = 'fresh'`, format: 'JSONEachRow' })).json<{ n: number }>()
  t.equal(Number(rows[0]?.n), 1)
  t.equal((await store.get(id))?.outcome, 'hit')
})
