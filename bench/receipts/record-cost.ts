/**
 * What recording a receipt costs, by variant of the write (`node dist/bench/receipts/record-cost.js
 * [--batches=10] [--batch=5000] [--seed=200000] [--rounds=2] [--variants=compact,filtered]`). Each variant runs in a
 * process of its own on a fresh chDB folder (the engine binds one folder per process)
 * seeded with `--seed` receipts; it records `--batches` batches of new receipts, then
 * waits for the background merges those inserts started, and prints the process's CPU
 * time (every thread: the engine's and its merges' too) and wall time per receipt.
 * Variants alternate over `--rounds`, so a neighbour's burst lands on all of them. CPU per
 * receipt is the figure that matters when the recorder shares the gateway's cores.
 */
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { createClient } from '@clickhouse/client'
import { ClickHouseReceiptStore, receiptIdOf, type ReceiptInput } from '../../receipts/index.js'

const require = createRequire(import.meta.url)
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const BATCHES = arg('batches', 10)
const BATCH = arg('batch', 5000)
const SEED = arg('seed', 200_000)
const ROUNDS = arg('rounds', 2)
const VARIANTS = {
  before: 'look-up + the client inserting an object per row (JSONEachRow)',
  compact: 'look-up + one prepared JSONCompactEachRow buffer (raw insert)',
  'compact-no-fsync': 'the same, parts not synced (fsync_after_insert = 0)',
  'insert-only': 'the compact insert alone: no look-up, no look-up view',
  filtered: 'look-up of the ids the filter of recorded ids may hold + compact',
} as const
type Variant = keyof typeof VARIANTS

let next = 0
function batch(): ReceiptInput[] {
  const out: ReceiptInput[] = []
  const now = Date.now()
  for (let i = 0; i < BATCH; i++, next++) {
    const at = new Date(now - 1000 + (i % 1000)).toISOString()
    out.push({ source_id: `src-${next % 16}`, agent_id: `agent-${next % 16}`, signal_id: `sig-${next}`, key_id: 'key-1', token: '0x' + (next % 5000).toString(16).padStart(40, '0'), severity: 'high', confidence: 80, note: null, test: false, emitted_at: at, received_at: at })
  }
  return out
}

async function runVariant(variant: Variant): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'record-cost-'))
  const path = join(dir, 'clickhouse')
  try {
    const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path, maxServerMemoryBytes: 1_000_000_000 } })
    await store.open()
    const { Session } = require('chdb') as typeof import('chdb')
    const session = new Session(path)
    const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
    const client = createClient({ connection: createChdbConnection({ path }) as never })
    await session.queryAsync(`INSERT INTO receipts (source_id, test, emitted_at, receipt_id, agent_id, signal_id, key_id, token, severity, confidence, note, received_at, recorded_at)
      SELECT concat('seed-', toString(number % 16)), false, now64(3), concat('rc_', lower(hex(substring(SHA256(toString(number)), 1, 16)))), 'agent', toString(number), 'key-1', 'tok', 'high', 50, NULL, now64(3), now64(3) FROM numbers(${SEED})`)
    await session.queryAsync('OPTIMIZE TABLE receipts FINAL')
    await session.queryAsync('OPTIMIZE TABLE receipt_ids FINAL')
    if (variant === 'compact-no-fsync') {
      await session.queryAsync('ALTER TABLE receipts MODIFY SETTING fsync_after_insert = 0, fsync_part_directory = 0')
      await session.queryAsync('ALTER TABLE receipt_ids MODIFY SETTING fsync_after_insert = 0, fsync_part_directory = 0')
    }
    if (variant === 'insert-only') await session.queryAsync('DROP VIEW receipt_ids_recorded')
    // Built from the seeded ids before the clock starts, as the recorder builds it when it takes its consumer.
    const filterMs0 = performance.now()
    if (variant === 'filtered') await store.trackRecordedIds()
    const filterMs = performance.now() - filterMs0
    const COLS = ['source_id', 'test', 'emitted_at', 'receipt_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'confidence', 'note', 'received_at', 'recorded_at']
    const batches = Array.from({ length: BATCHES }, batch)
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    for (const b of batches) {
      if (variant === 'before') {
        const ids = b.map((r) => receiptIdOf(r.source_id, r.signal_id))
        await client.query({ query: 'SELECT DISTINCT receipt_id FROM receipt_ids WHERE receipt_id IN {ids:Array(String)}', query_params: { ids }, format: 'JSONEachRow' }).then((r) => r.json())
        const now = Date.now()
        await client.insert({ table: 'receipts', format: 'JSONEachRow', values: b.map((r, i) => ({ source_id: r.source_id, test: r.test, emitted_at: Date.parse(r.emitted_at), receipt_id: ids[i], agent_id: r.agent_id, signal_id: r.signal_id, key_id: r.key_id, token: r.token, severity: r.severity, confidence: r.confidence, note: r.note, received_at: Date.parse(r.received_at), recorded_at: now })) })
      } else if (variant === 'insert-only') {
        const now = Date.now()
        let body = ''
        for (const r of b) body += `${JSON.stringify([r.source_id, r.test, Date.parse(r.emitted_at), receiptIdOf(r.source_id, r.signal_id), r.agent_id, r.signal_id, r.key_id, r.token, r.severity, r.confidence, r.note, Date.parse(r.received_at), now])}\n`
        await session.insert({ table: 'receipts', values: Buffer.from(body), format: 'JSONCompactEachRow', columns: COLS })
      } else {
        await store.record(b)
      }
    }
    const wall = performance.now() - t0
    // The merges these inserts started are part of their cost.
    for (let i = 0; i < 100; i++) {
      const running = Number((await session.queryAsync("SELECT count() FROM system.merges WHERE table IN ('receipts', 'receipt_ids')", { format: 'CSV' })).text().trim())
      if (running === 0) break
      await sleep(100)
    }
    const cpu = process.cpuUsage(cpu0)
    const n = BATCHES * BATCH
    process.stdout.write(`${JSON.stringify({ variant, wall_us: Number(((wall * 1000) / n).toFixed(1)), cpu_us: Number(((cpu.user + cpu.system) / n).toFixed(1)), ...(variant === 'filtered' && { filter_build_ms: Math.round(filterMs) }) })}\n`)
    session.close()
    await client.close()
    await store.close()
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

const CHOSEN = (process.argv.find((a) => a.startsWith('--variants='))?.split('=')[1]?.split(',') ?? Object.keys(VARIANTS)) as Variant[]
const only = process.argv.find((a) => a.startsWith('--variant='))?.split('=')[1] as Variant | undefined
if (only !== undefined) await runVariant(only)
else {
  const results = new Map<Variant, { wall_us: number; cpu_us: number; filter_build_ms?: number }[]>()
  for (let round = 0; round < ROUNDS; round++) {
    for (const v of CHOSEN) {
      const out = execFileSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), `--variant=${v}`, ...process.argv.slice(2)], { encoding: 'utf8' })
      const r = JSON.parse(out.trim().split('\n').pop()!) as { wall_us: number; cpu_us: number; filter_build_ms?: number }
      results.set(v, [...(results.get(v) ?? []), r])
    }
  }
  console.log(`${BATCHES} batches of ${BATCH} new receipts over ${SEED.toLocaleString('en-US')} seeded, each variant in its own process, ${ROUNDS} rounds; µs per receipt, each round:`)
  for (const [v, rs] of results) {
    const build = rs[0]?.filter_build_ms === undefined ? '' : `   filter built from the seed in ${rs.map((r) => r.filter_build_ms).join(', ')} ms`
    console.log(`  ${VARIANTS[v].padEnd(66)} cpu ${rs.map((r) => r.cpu_us).join(', ')}   wall ${rs.map((r) => r.wall_us).join(', ')}${build}`)
  }
}
