/**
 * What recording a receipt costs, split by step (`node dist/bench/receipts/record-cost.js
 * [--batches=10] [--batch=5000] [--seed=200000]`): on a fresh chDB folder seeded with
 * `--seed` receipts, each variant writes `--batches` batches of new receipts, and the
 * process's CPU time (every thread: the engine's too) and wall time per receipt are
 * printed. CPU per receipt is the figure that matters when the recorder shares the
 * gateway's cores.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { ClickHouseReceiptStore, receiptIdOf, type ReceiptInput } from '../../receipts/index.js'
import { recordedStatement } from '../../receipts/receipt-query.js'

const require = createRequire(import.meta.url)
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const BATCHES = arg('batches', 10)
const BATCH = arg('batch', 5000)
const SEED = arg('seed', 200_000)

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

async function measure(name: string, fn: (b: ReceiptInput[]) => Promise<unknown>): Promise<void> {
  const batches = Array.from({ length: BATCHES }, batch)
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  for (const b of batches) await fn(b)
  const wall = performance.now() - t0
  const cpu = process.cpuUsage(cpu0)
  const n = BATCHES * BATCH
  console.log(`${name.padEnd(58)} wall ${((wall * 1000) / n).toFixed(1).padStart(6)} µs/receipt   cpu ${((cpu.user + cpu.system) / n).toFixed(1).padStart(6)} µs/receipt`)
}

const dir = await mkdtemp(join(tmpdir(), 'record-cost-'))
const path = join(dir, 'clickhouse')
try {
  const store = new ClickHouseReceiptStore({ target: { kind: 'chdb', path, maxServerMemoryBytes: 1_000_000_000 } })
  await store.open()
  const { Session } = require('chdb') as typeof import('chdb')
  const session = new Session(path)
  for (let i = 0; i < SEED / BATCH; i++) await store.record(batch())
  const rows = (b: ReceiptInput[]) =>
    b.map((r) => ({ source_id: r.source_id, test: r.test, emitted_at: Date.parse(r.emitted_at), receipt_id: receiptIdOf(r.source_id, r.signal_id), agent_id: r.agent_id, signal_id: r.signal_id, key_id: r.key_id, token: r.token, severity: r.severity, confidence: r.confidence, note: r.note, received_at: Date.parse(r.received_at), recorded_at: Date.now() }))
  const COLS = ['source_id', 'test', 'emitted_at', 'receipt_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'confidence', 'note', 'received_at', 'recorded_at']
  const compact = (b: ReceiptInput[]) => {
    const now = Date.now()
    let s = ''
    for (const r of b) s += JSON.stringify([r.source_id, r.test, Date.parse(r.emitted_at), receiptIdOf(r.source_id, r.signal_id), r.agent_id, r.signal_id, r.key_id, r.token, r.severity, r.confidence, r.note, Date.parse(r.received_at), now]) + '\n'
    return Buffer.from(s)
  }
  const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path }) as never })
  await measure('store.record (look-up + insert)', (b) => store.record(b))
  await measure('look-up of the batch ids only', (b) => session.queryBindAsync(recordedStatement(b.map((r) => receiptIdOf(r.source_id, r.signal_id))).query, { receipt_ids: b.map((r) => receiptIdOf(r.source_id, r.signal_id)) }, { format: 'JSONEachRow' }))
  await measure('receipt ids and row objects only (JS)', async (b) => rows(b))
  await measure('JSONCompactEachRow buffer only (JS)', async (b) => compact(b))
  await measure('client insert of row objects (JSONEachRow)', (b) => client.insert({ table: 'receipts', values: rows(b), format: 'JSONEachRow' }))
  await measure('raw insert, JSONEachRow of row objects', (b) => session.insert({ table: 'receipts', values: Buffer.from(rows(b).map((r) => JSON.stringify(r)).join('\n')), format: 'JSONEachRow' }))
  await measure('raw insert, JSONCompactEachRow buffer', (b) => session.insert({ table: 'receipts', values: compact(b), format: 'JSONCompactEachRow', columns: COLS }))
  await session.queryAsync('ALTER TABLE receipts MODIFY SETTING fsync_after_insert = 0, fsync_part_directory = 0')
  await session.queryAsync('ALTER TABLE receipt_ids MODIFY SETTING fsync_after_insert = 0, fsync_part_directory = 0')
  await measure('raw insert, JSONCompactEachRow buffer, no fsync', (b) => session.insert({ table: 'receipts', values: compact(b), format: 'JSONCompactEachRow', columns: COLS }))
  await session.queryAsync('DROP VIEW receipt_ids_recorded')
  await measure('raw insert, compact, no fsync, no look-up view', (b) => session.insert({ table: 'receipts', values: compact(b), format: 'JSONCompactEachRow', columns: COLS }))
  session.close()
  await client.close()
  await store.close()
} finally {
  await rm(dir, { recursive: true, force: true })
}
