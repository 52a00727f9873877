/**
 * What the embedded ClickHouse engine (chDB) costs this process, measured in a fresh one:
 *
 *   node dist/bench/receipts/engine-probe.js [--max-server-memory-bytes=N]
 *
 * Prints the time to load the library and open a data folder, the RSS after each, a
 * 10,000-row JSONEachRow insert through @clickhouse/client, a parameterised count, and
 * whether the engine-wide memory cap (max_server_memory_usage, passed as an engine
 * argument) stops a query that would need more. The data folder is a fresh temporary one.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const require = createRequire(import.meta.url)
const mb = (bytes: number) => `${Math.round(bytes / 1e6)} MB`
const rss = () => mb(process.memoryUsage().rss)
const since = (t: number) => `${(performance.now() - t).toFixed(1)} ms`

const capArg = process.argv.find((a) => a.startsWith('--max-server-memory-bytes='))
const cap = capArg === undefined ? 512_000_000 : Number(capArg.split('=')[1])

const dir = await mkdtemp(join(tmpdir(), 'receipts-engine-probe-'))
try {
  console.log(`node ${process.version}, RSS at start ${rss()}`)
  let t = performance.now()
  const chdb = require('chdb') as typeof import('chdb')
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const { createClient } = require('@clickhouse/client') as typeof import('@clickhouse/client')
  console.log(`load chdb and @clickhouse/client: ${since(t)}, RSS ${rss()}`)
  t = performance.now()
  const session = new chdb.Session(dir, { connectionArgs: [`--max_server_memory_usage=${cap}`, '--mark_cache_size=67108864'] })
  // chdb types its connection against @clickhouse/client-common, the client against its own copy of the same types.
  const client = createClient({ connection: createChdbConnection({ path: dir }) as never })
  const version = await (await client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' })).json<{ v: string }>()
  console.log(`open the data folder and run a first query (ClickHouse ${version[0]?.v}): ${since(t)}, RSS ${rss()}`)
  await client.command({ query: 'CREATE TABLE t (id UInt64, s String, at DateTime64(3)) ENGINE = MergeTree ORDER BY id' })
  const rows = Array.from({ length: 10_000 }, (_, i) => ({ id: i, s: `row-${i}-${'x'.repeat(40)}`, at: Date.now() }))
  t = performance.now()
  await client.insert({ table: 't', values: rows, format: 'JSONEachRow' })
  console.log(`insert 10,000 rows (JSONEachRow): ${since(t)}, RSS ${rss()}`)
  const times: number[] = []
  for (let i = 0; i < 20; i++) {
    t = performance.now()
    await (await client.query({ query: 'SELECT count() AS c FROM t WHERE id > {from:UInt64}', query_params: { from: i }, format: 'JSONEachRow' })).json()
    times.push(performance.now() - t)
  }
  times.sort((a, b) => a - b)
  console.log(`parameterised count over 10,000 rows: median ${times[10]?.toFixed(1)} ms, worst ${times[19]?.toFixed(1)} ms`)
  try {
    await (await client.query({ query: 'SELECT length(groupArray(number)) AS n FROM numbers(100000000)', format: 'JSONEachRow' })).json()
    console.log(`a query needing about 1 GB ran under max_server_memory_usage=${mb(cap)}: the cap did not hold`)
  } catch (err) {
    const e = err as { code?: string; type?: string }
    console.log(`a query needing about 1 GB under max_server_memory_usage=${mb(cap)}: refused with ${e.type} (${e.code}); RSS ${rss()}`)
  }
  await client.close()
  session.close()
} finally {
  await rm(dir, { recursive: true, force: true })
}
