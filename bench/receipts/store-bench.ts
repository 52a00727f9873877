/**
 * Receipt store micro-benchmark on chDB, in this process:
 *
 *   node dist/bench/receipts/store-bench.js [--rows=1000000] [--sources=1000]
 *
 * Seeds receipts with INSERT ... SELECT FROM numbers() (a tenth scored, a few disputed),
 * then measures: recording through the store (10,000-receipt batches, with the
 * already-recorded look-up), a filtered page (one source, newest first, 100 rows; with and
 * without an outcome filter; and the same statement without FINAL, the price of exactly-once
 * reads), get by id, and an NDJSON export of everything with RSS sampled while it runs.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { ClickHouseReceiptStore, receiptIdOf } from '../../receipts/index.js'

const require = createRequire(import.meta.url)
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const ROWS = arg('rows', 1_000_000)
const SOURCES = arg('sources', 1000)
const mb = (b: number) => `${Math.round(b / 1e6)} MB`
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))]!.toFixed(1)

async function timed(n: number, fn: (i: number) => Promise<unknown>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const t = performance.now()
    await fn(i)
    out.push(performance.now() - t)
  }
  return out
}

const dir = await mkdtemp(join(tmpdir(), 'receipts-bench-'))
const path = join(dir, 'clickhouse')
try {
  console.log(`node ${process.version}; ${ROWS.toLocaleString()} receipts over ${SOURCES} sources; RSS at start ${mb(process.memoryUsage().rss)}`)
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path, maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path }) as never })
  const BASE = 1_750_000_000_000
  let t = performance.now()
  // The same rows the recorder writes; ids as the store makes them (sha256 in SQL: hex of the first 16 bytes).
  await client.command({
    query: `INSERT INTO receipts (source_id, test, emitted_at, receipt_id, agent_id, signal_id, key_id, token, severity, confidence, note, received_at, recorded_at)
      SELECT concat('src-', toString(number % ${SOURCES})) AS source_id, false, fromUnixTimestamp64Milli(toInt64(${BASE} + number * 997), 'UTC') AS emitted_at,
        concat('rc_', lower(hex(substring(SHA256(concat('receipt', char(0), source_id, char(0), signal_id)), 1, 16)))), concat('agent-', toString(number % ${SOURCES} % 97)),
        concat('sig-', toString(number)) AS signal_id, 'key-1', concat('0x', leftPad(hex(number % 5000), 40, '0')), ['low', 'high', 'critical'][number % 3 + 1], number % 101, 'a note',
        emitted_at + toIntervalMillisecond(250), now64(3)
      FROM numbers(${ROWS})`,
  })
  await client.command({
    query: `INSERT INTO receipts (source_id, test, emitted_at, receipt_id, scoring)
      SELECT source_id, test, emitted_at, receipt_id, tuple(emitted_at + toIntervalHour(2), now64(3), emitted_at, emitted_at + toIntervalHour(1), 1.5, ['hit', 'miss', 'void'][cityHash64(receipt_id) % 3 + 1])
      FROM receipts WHERE cityHash64(receipt_id) % 10 = 0`,
  })
  console.log(`seeded in ${((performance.now() - t) / 1000).toFixed(1)} s; RSS ${mb(process.memoryUsage().rss)}`)
  const check = await store.get(receiptIdOf('src-7', 'sig-7'))
  if (check?.signal_id !== 'sig-7') throw new Error('seeded ids do not match the store\'s')

  let next = ROWS
  const batch = () => Array.from({ length: 10_000 }, () => { const n = next++; return { source_id: `src-${n % SOURCES}`, agent_id: 'agent-1', signal_id: `sig-${n}`, key_id: 'key-1', token: `0x${'a'.repeat(40)}`, severity: 'high', confidence: 5, note: null, test: false, emitted_at: new Date(BASE + n * 997).toISOString(), received_at: new Date(BASE + n * 997 + 250).toISOString() } })
  const rec = await timed(5, () => store.record(batch()))
  console.log(`record 10,000-receipt batches: median ${pct(rec, 50)} ms (${Math.round(10_000 / (Number(pct(rec, 50)) / 1000)).toLocaleString()} receipts/s)`)

  const src = (i: number) => `src-${(i * 7919) % SOURCES}`
  const pages = await timed(200, (i) => store.list({ source_id: src(i), limit: 100 }))
  console.log(`page of 100, one source: p50 ${pct(pages, 50)} ms, p95 ${pct(pages, 95)} ms`)
  const filtered = await timed(200, (i) => store.list({ source_id: src(i), outcome: 'hit', severity: 'high', limit: 100 }))
  console.log(`page of 100, one source, outcome=hit and severity=high: p50 ${pct(filtered, 50)} ms, p95 ${pct(filtered, 95)} ms`)
  const deep = await store.list({ source_id: src(1), limit: 1000 })
  const cursorPages = await timed(100, () => store.list({ source_id: src(1), limit: 100, cursor: deep.next_cursor! }))
  console.log(`page after a cursor 1,000 deep: p50 ${pct(cursorPages, 50)} ms, p95 ${pct(cursorPages, 95)} ms`)
  for (const final of ['FINAL', '']) {
    const q = `SELECT receipt_id, severity FROM receipts ${final} WHERE source_id = {s:String} AND test = false AND signal_id != '' ORDER BY emitted_at DESC, receipt_id DESC LIMIT 100`
    const ms = await timed(200, async (i) => (await client.query({ query: q, query_params: { s: src(i) }, format: 'JSONEachRow' })).json())
    console.log(`the page statement ${final ? 'with' : 'without'} FINAL: p50 ${pct(ms, 50)} ms, p95 ${pct(ms, 95)} ms`)
  }
  const gets = await timed(100, (i) => store.get(receiptIdOf(src(i), `sig-${(i * 7919) % SOURCES}`)))
  console.log(`get by id: p50 ${pct(gets, 50)} ms, p95 ${pct(gets, 95)} ms`)

  let rows = 0
  let maxRss = 0
  t = performance.now()
  for await (const chunk of store.export({}, 'ndjson')) {
    for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) rows++
    maxRss = Math.max(maxRss, process.memoryUsage().rss)
  }
  const s = (performance.now() - t) / 1000
  console.log(`NDJSON export of ${rows.toLocaleString()} rows: ${s.toFixed(1)} s, ${Math.round(rows / s).toLocaleString()} rows/s, peak RSS ${mb(maxRss)}`)
  await client.close()
  await store.close()
} finally {
  await rm(dir, { recursive: true, force: true })
}
