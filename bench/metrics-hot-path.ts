/**
 * The cost of the metrics work done per ingest request: time and heap bytes per call, for
 * the gateway's `Metrics` (what ships) and, for comparison, prom-client's own Counter and
 * Histogram called per request with label children cached once (what it replaces).
 *
 *   node --expose-gc --min-semi-space-size=64 --max-semi-space-size=64 \
 *     dist/bench/metrics-hot-path.js [calls] [--json]
 *
 * Bytes are measured over at most 100,000 calls with a young generation large enough that
 * no collection runs meanwhile (a collection during the count would hide the garbage);
 * without --expose-gc they are not measured.
 */
import { argv } from 'node:process'
import { pathToFileURL } from 'node:url'
import { PerformanceObserver } from 'node:perf_hooks'
import { Counter, Histogram, Registry } from 'prom-client'
// Internals on purpose, as verify-ceiling.ts measures pipeline/verify/ed25519.ts: what is timed is the module itself.
import { Metrics } from '../gateway/metrics.js'
import type { ErrorCode } from '../schemas/index.js'

export interface CallCost {
  readonly nsPerCall: number
  /** NaN when it could not be measured (no --expose-gc, or a collection ran). */
  readonly bytesPerCall: number
}

const gc = (globalThis as { gc?: () => void }).gc
/** Varied latencies, as requests have, from 0.1 to 20 ms. */
const LATENCIES_MS = Float64Array.from({ length: 4096 }, (_, i) => 0.1 + ((i * 7919) % 4096) / 205)
const CODES: readonly ErrorCode[] = ['invalid_signature', 'rate_limited', 'overloaded']

let collections = 0
new PerformanceObserver((list) => (collections += list.getEntries().length)).observe({ entryTypes: ['gc'] })

async function measure(call: (i: number) => void, calls: number): Promise<CallCost> {
  for (let i = 0; i < 200_000; i++) call(i) // optimised before it is timed
  const start = process.hrtime.bigint()
  for (let i = 0; i < calls; i++) call(i)
  const nsPerCall = Number(process.hrtime.bigint() - start) / calls
  let bytesPerCall = Number.NaN
  if (gc !== undefined) {
    const counted = Math.min(calls, 100_000)
    gc()
    await new Promise((resolve) => setTimeout(resolve, 20)) // the observer's entry for that gc() arrives
    collections = 0
    const before = process.memoryUsage().heapUsed
    for (let i = 0; i < counted; i++) call(i)
    const after = process.memoryUsage().heapUsed
    await new Promise((resolve) => setTimeout(resolve, 20))
    if (collections === 0) bytesPerCall = Math.max(0, after - before) / counted
  }
  return { nsPerCall, bytesPerCall }
}

export async function metricsHotPathCosts(calls: number): Promise<Record<string, CallCost>> {
  const zero = () => 0
  const gateway = new Metrics({ verifySlotsTaken: zero, liveNonces: zero, dedupEntries: zero, journalLastSeq: zero, inFlightRequests: zero, provenAddresses: zero })
  const registry = new Registry()
  const accepted = new Counter({ name: 'accepted_total', help: 'h', labelNames: ['deduplicated'], registers: [registry] })
  const firstAccepts = accepted.labels('false')
  const retries = accepted.labels('true')
  const latency = new Histogram({ name: 'latency_seconds', help: 'h', buckets: [0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 100, 250, 500, 1000, 5000].map((ms) => ms / 1000), registers: [registry] })
  const refused = new Counter({ name: 'refused_total', help: 'h', labelNames: ['code'], registers: [registry] })
  const refusedBy = CODES.map((code) => refused.labels(code))
  return {
    'gateway: accepted + latency': await measure((i) => gateway.accepted(LATENCIES_MS[i & 4095] as number, i % 10 === 0), calls),
    'gateway: refused': await measure((i) => gateway.refused(CODES[i % 3] as ErrorCode), calls),
    'prom-client: child inc + observe': await measure((i) => {
      ;(i % 10 === 0 ? retries : firstAccepts).inc()
      latency.observe((LATENCIES_MS[i & 4095] as number) / 1000)
    }, calls),
    'prom-client: child inc (refused)': await measure((i) => refusedBy[i % 3]?.inc(), calls),
  }
}

if (import.meta.url === pathToFileURL(argv[1] ?? '').href) {
  const calls = Number(argv.slice(2).find((a) => /^[0-9]+$/.test(a)) ?? 1_000_000)
  const costs = await metricsHotPathCosts(calls)
  if (argv.includes('--json')) console.log(JSON.stringify(costs))
  else {
    console.log(`${calls} calls each (bytes over ${Math.min(calls, 100_000)})`)
    for (const [name, cost] of Object.entries(costs)) console.log(`  ${name.padEnd(34)} ${cost.nsPerCall.toFixed(1).padStart(7)} ns/call  ${Number.isNaN(cost.bytesPerCall) ? 'n/a' : cost.bytesPerCall.toFixed(1)} bytes/call`)
  }
}
