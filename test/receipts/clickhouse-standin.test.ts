import { ClickHouseError, createClient } from '@clickhouse/client'
import t from 'tap'
import { isReceiptStoreError } from '../../receipts/index.js'
import { toStoreError } from '../../receipts/clickhouse-errors.js'
import { standIn, standInDatabaseUrl } from '../helpers/receipts-server.js'

/**
 * The ClickHouse stand-in (harness/clickhouse-standin.ts) answers the real client as a
 * server's HTTP interface does, for what the receipt store's server path relies on.
 */
const url = await standInDatabaseUrl('standin')
const client = createClient({ url, compression: { request: true, response: true } })
t.teardown(() => client.close())

t.test('parameters and settings in the URL, gzip both ways, rows streamed back', async (t) => {
  await client.command({ query: `CREATE TABLE t (a String, n UInt32) ENGINE = MergeTree ORDER BY a` })
  const odd = "quote ' backslash \\ tab \t newline \n"
  await client.insert({ table: 't', values: [{ a: odd, n: 1 }, { a: 'plain', n: 2 }], format: 'JSONEachRow' })
  const rows = await (await client.query({ query: 'SELECT a, n FROM t WHERE a IN {ids:Array(String)} ORDER BY n', query_params: { ids: [odd, 'absent'] }, format: 'JSONEachRow' })).json<{ a: string; n: number }>()
  t.same(rows, [{ a: odd, n: 1 }], 'a parameter arrives as it was sent')
  const setting = await (await client.query({ query: `SELECT getSetting('max_block_size') AS m`, clickhouse_settings: { max_block_size: '777' }, format: 'JSONEachRow' })).json<{ m: number }>()
  t.equal(Number(setting[0]?.m), 777, 'a URL setting applies to its statement')
  const result = await client.exec({ query: 'SELECT number FROM numbers(50000) FORMAT CSV', clickhouse_settings: { max_block_size: '1000' } })
  t.equal(result.response_headers['content-encoding'], 'gzip')
  let lines = 0
  for await (const chunk of result.stream) lines += String(chunk).split('\n').length - 1
  t.equal(lines, 50_000)
})

t.test('query_id is answered back; a session keeps its state', async (t) => {
  const r = await client.query({ query: 'SELECT 1', query_id: 'my-query-id', format: 'JSONEachRow' })
  t.equal(r.query_id, 'my-query-id')
  t.equal(r.response_headers['x-clickhouse-query-id'], 'my-query-id')
  await r.close()
  await client.command({ query: 'CREATE TEMPORARY TABLE tmp (x UInt8)', session_id: 's1' })
  await client.command({ query: 'INSERT INTO tmp VALUES (7)', session_id: 's1' })
  t.same(await (await client.query({ query: 'SELECT x FROM tmp', session_id: 's1', format: 'JSONEachRow' })).json(), [{ x: 7 }])
  await t.rejects(client.query({ query: 'SELECT 1', session_id: 'unknown', clickhouse_settings: { session_check: 1 } as never }), { code: '372' })
})

t.test('errors carry ClickHouse codes the store maps', async (t) => {
  const err = await client.query({ query: 'SELECT * FROM no_such_table' }).catch((e: unknown) => e)
  t.ok(err instanceof ClickHouseError)
  t.match(err, { code: '60', type: 'UNKNOWN_TABLE' })
  t.ok(isReceiptStoreError(toStoreError('reading', err), 'store_failed'))
  const memory = await client.query({ query: 'SELECT 1', clickhouse_settings: { max_memory_usage: '1' } as never, format: 'JSONEachRow' }).then((r) => r.json()).catch((e: unknown) => e)
  t.ok(isReceiptStoreError(toStoreError('reading', memory), 'unavailable'), `a memory limit is transient: ${String(memory)}`)
  const server = await standIn()
  const wrong = createClient({ url: server.url.replace(/:[^:@/]+@/, ':wrong@') })
  t.teardown(() => wrong.close())
  await t.rejects(wrong.query({ query: 'SELECT 1' }), { code: '516' }, 'a wrong password is AUTHENTICATION_FAILED')
})
