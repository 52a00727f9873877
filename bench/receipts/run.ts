/**
 * The receipts benchmark (`npm run bench:receipts`), on chDB as the service runs it:
 *
 *   node dist/bench/receipts/run.js [--rows=10000000] [--sources=1000] [--runs=50]
 *     [--cross-runs=5] [--export-rows=2000000] [--max-memory-mb=1024] [--no-optimize]
 *     [--half-peak-s=20] [--no-http] [--no-ingest] [--no-full-export]
 *
 * Seeds receipts with INSERT ... SELECT FROM numbers() into a throwaway data folder (removed
 * at the end), then measures at the store level, in this process, first as inserted (many
 * parts, as after a burst of ingest, once the background merges settled) and then after
 * OPTIMIZE FINAL (the merged steady state): a filtered first page of one source, a deep
 * cursor page, cross-source searches, get by id; recording batches of 5,000; and exports in
 * each format with this process's RSS sampled every 50 ms. Then it closes its engine and
 * starts the real gateway on the same folder (gateway-phases.ts): the same pages and the
 * exports through HTTP with the gateway's RSS, the recorder's lag at the ingest peak, and
 * ingest latency with and without an export running (ingest-phases.ts). The last line is
 * one JSON object with every figure; a figure not measured is null with the reason.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { cpus, loadavg, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { ClickHouseReceiptStore, receiptIdOf, type ExportFormat, type ReceiptInput } from '../../receipts/index.js'
import { SEED_BASE_MS, SEED_SPACING_MS, seededSignal, seededSource, seededToken, seedReceipts } from './seed.js'
import { gatewayPhases } from './gateway-phases.js'
import { rssSampler, timed, type Timing } from './stats.js'

const require = createRequire(import.meta.url)
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const ROWS = arg('rows', 10_000_000)
const SOURCES = arg('sources', 1000)
const RUNS = arg('runs', 50)
const CROSS_RUNS = arg('cross-runs', 5)
const EXPORT_ROWS = Math.min(arg('export-rows', 2_000_000), ROWS)
const MAX_MEMORY_MB = arg('max-memory-mb', 1024)
const OPTIMIZE = !process.argv.includes('--no-optimize')
const HTTP = !process.argv.includes('--no-http')
const INGEST = !process.argv.includes('--no-ingest')
const FULL_EXPORT = !process.argv.includes('--no-full-export')
const HALF_PEAK_MS = arg('half-peak-s', 20) * 1000
const mb = () => Math.round(process.memoryUsage().rss / 1e6)
const load = () => loadavg().map((x) => Number(x.toFixed(2)))
const log = (line = '') => console.log(line)
const fmt = (name: string, t: Timing) => log(`  ${name}: p50 ${t.p50_ms} ms, p95 ${t.p95_ms} ms (max ${t.max_ms} ms, ${t.runs} runs)`)

const result: Record<string, unknown> = { bench: 'receipts', engine: 'chdb', rows: ROWS, sources: SOURCES }
const dir = await mkdtemp(join(tmpdir(), 'receipts-bench-'))
const path = join(dir, 'clickhouse')
try {
  result.machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, ram_gib: Number((totalmem() / 2 ** 30).toFixed(1)), load_before: load() }
  log(`machine: ${cpus()[0]?.model}, ${cpus().length} cores, ${(totalmem() / 2 ** 30).toFixed(1)} GiB; load average ${load().join(' ')}`)
  const rssStart = mb()
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path, maxServerMemoryBytes: MAX_MEMORY_MB * 1024 * 1024 } })
  await store.open()
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path }) as never })
  const sql = async <T>(query: string) => (await client.query({ query, format: 'JSONEachRow' })).json<T>()
  const [version] = await sql<{ v: string }>('SELECT version() AS v')
  const chdbVersion = (require('chdb/package.json') as { version: string }).version
  result.versions = { node: process.versions.node, chdb: chdbVersion, clickhouse: version?.v }
  result.memory_cap_mb = MAX_MEMORY_MB
  const rssIdle = mb()
  log(`versions: node ${process.versions.node}, chdb ${chdbVersion} (ClickHouse ${version?.v}); engine memory cap (max_server_memory_usage) ${MAX_MEMORY_MB} MB`)
  log(`RSS: ${rssStart} MB before the engine, ${rssIdle} MB with the store open (idle)`)

  log(`seeding ${ROWS.toLocaleString()} receipts over ${SOURCES} sources`)
  const seed = await seedReceipts(client, { rows: ROWS, sources: SOURCES }, log)
  const [parts] = await sql<{ parts: number }>(`SELECT count() AS parts FROM system.parts WHERE active AND database = currentDatabase() AND table = 'receipts'`)
  result.seed = { receipts_s: Number(seed.receiptsS.toFixed(1)), receipts_per_s: Math.round(ROWS / seed.receiptsS), scoring_s: Number(seed.scoringS.toFixed(1)), disputes_s: Number(seed.disputesS.toFixed(1)), parts: Number(parts?.parts) }
  log(`seeded in ${seed.receiptsS.toFixed(1)} s (${Math.round(ROWS / seed.receiptsS).toLocaleString()} receipts/s), scorings ${seed.scoringS.toFixed(1)} s, disputes ${seed.disputesS.toFixed(1)} s; ${parts?.parts} parts; RSS ${mb()} MB`)
  const check = await store.get(receiptIdOf(seededSource(7, SOURCES), seededSignal(7)))
  if (check?.signal_id !== seededSignal(7)) throw new Error('the seeded ids are not the store\'s')

  const source = (i: number) => seededSource((i * 7919) % SOURCES, SOURCES)
  async function reads(): Promise<Record<string, Timing>> {
    const out: Record<string, Timing> = {}
    out.first_page = await timed(RUNS, (i) => store.list({ source_id: source(i), limit: 100 }))
    fmt('first page of one source (100)', out.first_page)
    out.filtered_first_page = await timed(RUNS, (i) => store.list({ source_id: source(i), severity: 'high', outcome: 'hit', limit: 100 }))
    fmt('filtered first page: one source, severity=high, outcome=hit', out.filtered_first_page)
    // Page 50 of a walk of one source, 100 a page: the cursors are found once, then timed.
    const cursors: string[] = []
    for (let s = 0; s < 5; s++) {
      let cursor: string | undefined
      for (let p = 1; p < 50; p++) cursor = (await store.list({ source_id: source(s), limit: 100, ...(cursor ? { cursor } : {}) })).next_cursor
      if (cursor === undefined) throw new Error('a source has fewer than 50 pages: seed more rows')
      cursors.push(cursor)
    }
    out.deep_page = await timed(RUNS, (i) => store.list({ source_id: source(i % 5), limit: 100, cursor: cursors[i % 5]! }))
    fmt('page 50 of a walk (cursor)', out.deep_page)
    out.get_by_id = await timed(RUNS, (i) => store.get(receiptIdOf(seededSource(i * 7919, SOURCES), seededSignal(i * 7919))))
    fmt('get by id', out.get_by_id)
    out.cross_source_severity = await timed(CROSS_RUNS, () => store.list({ severity: 'critical', limit: 100 }), 1)
    fmt('every source, severity=critical', out.cross_source_severity)
    out.cross_source_token = await timed(CROSS_RUNS, (i) => store.list({ token: seededToken(i * 37), limit: 100 }), 1)
    fmt('every source, one token', out.cross_source_token)
    out.cross_source_agent = await timed(CROSS_RUNS, (i) => store.list({ agent_id: `agent-${i % 97}`, limit: 100 }), 1)
    fmt('every source, one agent_id', out.cross_source_agent)
    return out
  }

  // Background merges right after a burst compete for the two cores: the reads are
  // measured once they have settled (bounded wait), on the parts they leave.
  const settle = performance.now()
  while (performance.now() - settle < 180_000) {
    const [m] = await sql<{ n: number }>(`SELECT count() AS n FROM system.merges WHERE database = currentDatabase() AND table = 'receipts'`)
    if (Number(m?.n) === 0) break
    await new Promise((r) => setTimeout(r, 1000))
  }
  const [settled] = await sql<{ parts: number }>(`SELECT count() AS parts FROM system.parts WHERE active AND database = currentDatabase() AND table = 'receipts'`)
  result.merges_settled = { s: Number(((performance.now() - settle) / 1000).toFixed(1)), parts: Number(settled?.parts) }
  log(`background merges settled in ${((performance.now() - settle) / 1000).toFixed(1)} s: ${settled?.parts} parts`)
  log('reads before OPTIMIZE (parts as the background merges left them):')
  result.reads_unmerged = await reads()

  // Recording: batches of 5,000 new receipts across every source, then one already recorded.
  let next = ROWS
  const batch = (): ReceiptInput[] => Array.from({ length: 5000 }, () => {
    const n = next++
    return { source_id: seededSource(n, SOURCES), agent_id: 'agent-1', signal_id: seededSignal(n), key_id: 'key-1', token: seededToken(n), severity: 'high', confidence: 5, note: null, test: false, emitted_at: new Date(SEED_BASE_MS + n * SEED_SPACING_MS).toISOString(), received_at: new Date(SEED_BASE_MS + n * SEED_SPACING_MS + 250).toISOString() }
  })
  const batches = Array.from({ length: 13 }, batch)
  const record = await timed(10, (i) => store.record(batches[i]!), 3)
  const again = await timed(5, (i) => store.record(batches[i]!), 0)
  result.record_5000 = { new: record, already_recorded: again }
  fmt('record 5,000 new receipts', record)
  fmt('record 5,000 already recorded (a redelivery)', again)

  if (OPTIMIZE) {
    const t = performance.now()
    await client.command({ query: 'OPTIMIZE TABLE receipts FINAL', clickhouse_settings: { max_execution_time: 0 } })
    const [merged] = await sql<{ parts: number }>(`SELECT count() AS parts FROM system.parts WHERE active AND database = currentDatabase() AND table = 'receipts'`)
    result.optimize = { s: Number(((performance.now() - t) / 1000).toFixed(1)), parts: Number(merged?.parts) }
    log(`OPTIMIZE TABLE receipts FINAL: ${((performance.now() - t) / 1000).toFixed(1)} s, ${merged?.parts} parts`)
    log('reads merged:')
    result.reads_merged = await reads()
  }

  // Exports of the newest EXPORT_ROWS receipts (a time range), each format in turn.
  const from = SEED_BASE_MS + (ROWS - EXPORT_ROWS) * SEED_SPACING_MS
  const to = SEED_BASE_MS + ROWS * SEED_SPACING_MS
  const exports: Record<string, unknown> = {}
  for (const format of ['ndjson', 'csv', 'parquet'] as ExportFormat[]) {
    const rss = rssSampler()
    const t = performance.now()
    let bytes = 0
    let lines = 0
    for await (const chunk of store.export({ from, to }, format)) {
      bytes += chunk.length
      if (format !== 'parquet') for (let i = 0; i < chunk.length; i++) if (chunk[i] === 10) lines++
    }
    const s = (performance.now() - t) / 1000
    const memory = rss.stop()
    const rows = format === 'ndjson' ? lines : format === 'csv' ? lines - 1 : EXPORT_ROWS
    exports[format] = { rows, s: Number(s.toFixed(2)), rows_per_s: Math.round(rows / s), mb: Math.round(bytes / 1e6), rss_mb: memory }
    log(`  ${format} export of ${rows.toLocaleString()} rows: ${s.toFixed(1)} s, ${Math.round(rows / s).toLocaleString()} rows/s, ${Math.round(bytes / 1e6)} MB; RSS start ${memory.start_mb}, peak ${memory.peak_mb}, end ${memory.end_mb} MB`)
  }
  result.exports_store_level = exports

  result.rss_mb = { before_engine: rssStart, idle_open: rssIdle, end: mb() }
  // One engine per data folder: this process lets go of it before the gateway opens it.
  await client.close()
  await store.close()

  if (HTTP) {
    log('')
    result.through_gateway = await gatewayPhases(
      { dataDir: dir, maxMemoryMb: MAX_MEMORY_MB, runs: RUNS, crossRuns: CROSS_RUNS, source, exportRange: { from, to }, fullExport: FULL_EXPORT, ingest: INGEST, halfPeakMs: HALF_PEAK_MS },
      log,
    )
  } else {
    result.through_gateway = null
    result.through_gateway_reason = 'not measured: --no-http'
  }
} finally {
  await rm(dir, { recursive: true, force: true })
}
;(result.machine as Record<string, unknown>).load_after = load()
log(`load average after: ${load().join(' ')}`)
console.log(JSON.stringify(result))
