/**
 * The receipt log benchmark (`npm run bench:log`):
 *
 *   node dist/bench/receipt-log/run.js [--leaves=200000] [--rate=200] [--seconds=15] [--proofs=2000] [--ingest-peak=15945]
 *
 * 1. Hashing on one core, in this process: leaves built (salts, commitments, encoding) and
 *    appended to the tree per second, against the ingest peak (docs/benchmarks.md).
 * 2. The real gateway in its own process (default settings, checkpoints at most every
 *    second): signals pushed one after another at `rate` a second for `seconds`, while a
 *    monitor polls GET /v1/log/checkpoint every 20 ms; a signal's checkpoint latency is from
 *    its 202 to the first checkpoint seen whose size covers it (one source, pushed in
 *    order, so its leaf index is its place in the order of 202s).
 * 3. Proof serving: `proofs` GET /v1/byo/receipts/:id/proof one after another (the admin's,
 *    whose reads have no allowance), whole bundles, timed at the client.
 * 4. Storage: after the gateway stopped, the bytes on disk of the log's tables per entry.
 * The last line is one JSON object with every figure.
 */
import { createRequire } from 'node:module'
import { cpus, loadavg, totalmem } from 'node:os'
import { join } from 'node:path'
import { createClient } from '@clickhouse/client'
import { apiRequest, sendSigned } from '../../harness/api-request.js'
import { freePort, launchGateway } from '../../harness/gateway-launcher.js'
import { provisionSource } from '../../harness/provision-source.js'
import { generateCreatorKey, signPush } from '../../harness/signed-push.js'
import { receiptIdOf } from '../../receipts/index.js'
import { percentile } from '../receipts/stats.js'
import { hashingRates } from './hashing.js'

const require = createRequire(import.meta.url)
const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback)
const LEAVES = arg('leaves', 200_000)
const RATE = arg('rate', 200)
const SECONDS = arg('seconds', 15)
const PROOFS = arg('proofs', 2000)
const INGEST_PEAK = arg('ingest-peak', 15_945)
const log = (line = '') => console.log(line)
const round = (x: number) => Math.round(x * 10) / 10

const result: Record<string, unknown> = { bench: 'receipt-log' }
result.machine = { cpu: cpus()[0]?.model ?? 'unknown', cores: cpus().length, ram_gib: Number((totalmem() / 2 ** 30).toFixed(1)), load_before: loadavg().map((x) => round(x)), node: process.version }
log(`machine: ${cpus()[0]?.model}, ${cpus().length} cores; node ${process.version}; load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`)

const hashing = hashingRates(LEAVES)
result.hashing = { ...hashing, ingest_peak_per_s: INGEST_PEAK, headroom: round(hashing.build_and_append_per_s / INGEST_PEAK) }
log(`hashing, one core: ${hashing.build_and_append_per_s} leaves/s built and appended (${hashing.append_per_s}/s appended alone; SHA-256 of 64 bytes ${hashing.sha256_per_s}/s in the same run), ${round(hashing.build_and_append_per_s / INGEST_PEAK)}× the ingest peak of ${INGEST_PEAK}/s; root ${hashing.root_us} µs, inclusion proof ${hashing.proof_us} µs at ${LEAVES} leaves; a leaf is ${hashing.leaf_bytes} bytes`)

const gw = await launchGateway({ env: { LOG_LEVEL: 'warn' }, until: 'ready', port: await freePort() })
let dataDir = gw.dataDir
try {
  const key = generateCreatorKey()
  const { creatorToken, sourceId, keyId } = await provisionSource(gw, {
    creatorId: 'creator_bench', agentId: 'agent_bench', slots: 1, seed: key.seed,
    manifest: { archetype: 'wallet-watcher', schema_version: '1.0', severity_levels: ['info', 'warning'], max_rate: { rate: 1000, per: 'second', burst: 1000 }, coverage: { chains: ['solana'], wallet_set_size: 250 }, contact: 'ops@example.com' },
    testSignal: { signal_id: 'sig_test_bench', source_id: 'x', ts: new Date().toISOString(), token: 'So11111111111111111111111111111111111111112', severity: 'info' },
  })
  const seen: Array<{ size: number; at: number }> = []
  let stop = false
  const monitor = (async () => {
    while (!stop) {
      const res = await fetch(`${gw.url}/v1/log/checkpoint`).catch(() => undefined)
      if (res?.status === 200) {
        const size = Number((await res.text()).split('\n')[1])
        if (size > (seen[seen.length - 1]?.size ?? 0)) seen.push({ size, at: performance.now() })
      } else await res?.arrayBuffer()
      await new Promise((r) => setTimeout(r, 20))
    }
  })()
  const accepted: Array<{ id: string; at: number }> = []
  const start = performance.now()
  for (let i = 0; i < RATE * SECONDS; i++) {
    const due = start + (i * 1000) / RATE
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    const signalId = `sig_bench_${i}`
    const payload = { signal_id: signalId, source_id: sourceId, ts: new Date().toISOString(), token: 'So11111111111111111111111111111111111111112', severity: 'warning', confidence: 80, note: 'large transfer to a fresh wallet' }
    const res = await sendSigned(gw.url, signPush({ sourceId, keyId, key, payload }))
    if (res.status === 202) accepted.push({ id: receiptIdOf(sourceId, signalId), at: performance.now() })
  }
  for (const end = performance.now() + 15_000; (seen[seen.length - 1]?.size ?? 0) < accepted.length && performance.now() < end; ) await new Promise((r) => setTimeout(r, 20))
  stop = true
  await monitor
  const latencies = accepted.map((a, i) => {
    const cp = seen.find((s) => s.size >= i + 1)
    return cp === undefined ? Number.POSITIVE_INFINITY : Math.max(0, cp.at - a.at)
  })
  result.checkpoint_latency = { signals: accepted.length, rate_per_s: RATE, p50_ms: round(percentile(latencies, 50)), p99_ms: round(percentile(latencies, 99)), max_ms: round(Math.max(...latencies)), checkpoints: seen.length }
  log(`checkpoint latency (202 to a checkpoint covering it, ${accepted.length} signals at ${RATE}/s, ${seen.length} checkpoints seen): p50 ${round(percentile(latencies, 50))} ms, p99 ${round(percentile(latencies, 99))} ms, max ${round(Math.max(...latencies))} ms`)

  // Every receipt recorded first (the route answers 404 before the recorder wrote it).
  for (const end = performance.now() + 15_000; performance.now() < end; ) {
    if ((await apiRequest(gw.url, 'GET', `/v1/byo/receipts/${accepted[accepted.length - 1]!.id}/proof`, { token: creatorToken })).status === 200) break
    await new Promise((r) => setTimeout(r, 50))
  }
  const times: number[] = []
  for (let i = 0; i < PROOFS + 50; i++) {
    const id = accepted[(i * 7919) % accepted.length]!.id
    const t = performance.now()
    // The admin's reads are not rate limited; its view is the whole bundle, as an entitled reader's.
    const res = await apiRequest(gw.url, 'GET', `/v1/byo/receipts/${id}/proof`, { token: gw.adminToken })
    if (res.status !== 200) throw new Error(`proof answered ${res.status}`)
    if (i >= 50) times.push(performance.now() - t)
  }
  result.proof_serving = { requests: PROOFS, p50_ms: round(percentile(times, 50)), p99_ms: round(percentile(times, 99)), max_ms: round(Math.max(...times)) }
  log(`proof serving (${PROOFS} requests one after another, at the client): p50 ${round(percentile(times, 50))} ms, p99 ${round(percentile(times, 99))} ms, max ${round(Math.max(...times))} ms`)
} finally {
  await gw.stop()
}

// The gateway held the engine; now this process opens the same folder to read the tables' sizes.
const { createChdbConnection } = require('chdb/connection') as typeof import('chdb/connection')
const client = createClient({ connection: createChdbConnection({ path: join(dataDir, 'clickhouse') }) as never })
const parts = await (
  await client.query({
    query: "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts WHERE active AND table IN ('signed_requests', 'receipt_log_entries', 'receipt_log_checkpoints', 'receipts') GROUP BY table",
    format: 'JSONEachRow',
  })
).json<{ table: string; rows: number; bytes: number }>()
await client.close()
const entries = Number(parts.find((p) => p.table === 'receipt_log_entries')?.rows ?? 0)
const storage = Object.fromEntries(parts.map((p) => [p.table, { rows: Number(p.rows), bytes: Number(p.bytes), bytes_per_entry: entries === 0 ? null : round(Number(p.bytes) / entries) }]))
result.storage = { ...storage, tree_memory_bytes_per_entry: 64 }
log(`storage on disk per logged signal (${entries} entries, compressed): ${parts.map((p) => `${p.table} ${entries === 0 ? '?' : round(Number(p.bytes) / entries)} B`).join(', ')}; in memory, 64 B per leaf in each serving process`)
await gw.removeDataDir()
dataDir = ''
log(JSON.stringify(result))
