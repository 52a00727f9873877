import { loadavg } from 'node:os'
import { startBenchGateway, type BenchGateway } from '../ingest/gateway-process.js'
import { machineLines, openFileLimit, filesystemOf } from '../ingest/machine-info.js'
import { ProcessSampler } from '../ingest/process-sampler.js'
import { idlePhase, latencyPhase, receiverCeiling, replayPhase, setWebhooks, webhookPhase } from './phases.js'
import { benchRental, benchRentals, benchSources } from './setup.js'
import { webhooksAtScale } from './webhooks-10k.js'
import { GATEWAY_NODE_ARGS } from '../ingest/options.js'

/**
 * `npm run bench:delivery`: the delivery paths of a built gateway in its own process,
 * driven from this one (subscribers, pusher and webhook receivers share it, so a signal's
 * send time and its arrival are read from one clock):
 *   1. latency: 1,000 SSE streams over 100 rentals on 10 sources at 1,000 signals/s;
 *   2. idle: RSS per connection with 10,000 idle streams;
 *   3. replay: a stream resuming 10,000 events behind;
 *   4. webhooks: deliveries/s to 100 local receivers, then with a tenth of them failing;
 *   5. webhooks10k: 10,000 rentals with webhooks on a gateway of their own (RSS, idle CPU,
 *      deliveries/s, restart time).
 * Goals (2 cores): SSE p99 <= 20 ms, <= 10 KB per idle connection, >= 2,000 webhook deliveries/s.
 * Scale with env: BENCH_RATE, BENCH_SECONDS, BENCH_IDLE, BENCH_REPLAY, BENCH_WEBHOOK_SIGNALS;
 * BENCH_PHASES=latency,idle,replay,webhooks,webhooks10k runs only the phases it names (default: all);
 * BENCH_SCALE_RENTALS, BENCH_SCALE_SOURCES, BENCH_SCALE_SIGNALS scale phase 5.
 */

const num = (name: string, fallback: number) => Number(process.env[name] ?? fallback)
const SOURCES = 10
const RENTALS = 100
const SUBSCRIBERS_PER_RENTAL = 10
/** Streams per rental whose events are parsed and timed; the others are read and discarded unparsed. */
const PARSED_PER_RENTAL = num('BENCH_PARSED_PER_RENTAL', 1)
const RATE = num('BENCH_RATE', 1000)
const SECONDS = num('BENCH_SECONDS', 10)
const IDLE = num('BENCH_IDLE', 10_000)
const REPLAY = num('BENCH_REPLAY', 10_000)
const WEBHOOK_SIGNALS = num('BENCH_WEBHOOK_SIGNALS', 2000)
const PHASES = ['idle', 'latency', 'replay', 'webhooks', 'webhooks10k'] as const
const SELECTED = new Set((process.env['BENCH_PHASES'] ?? PHASES.join(',')).split(',').map((p) => p.trim()))
const unknownPhases = [...SELECTED].filter((p) => !(PHASES as readonly string[]).includes(p))
if (unknownPhases.length > 0) throw new Error(`BENCH_PHASES: unknown ${unknownPhases.join(', ')}; known: ${PHASES.join(', ')}`)
const SCALE_RENTALS = num('BENCH_SCALE_RENTALS', 10_000)
const SCALE_SOURCES = num('BENCH_SCALE_SOURCES', 100)
const SCALE_SIGNALS = num('BENCH_SCALE_SIGNALS', 400)
const GOALS = { sseP99Ms: 20, idleBytesPerConnection: 10 * 1024, webhookDeliveriesPerSecond: 2000 }

async function phase<T>(name: string, run: () => Promise<T>): Promise<T | { notMeasured: string }> {
  const t0 = Date.now()
  try {
    const result = await run()
    console.log(`${name} (${((Date.now() - t0) / 1000).toFixed(1)} s): ${JSON.stringify(result)}`)
    return result
  } catch (err) {
    const reason = err instanceof Error ? err.message.split('\n')[0]! : String(err)
    console.log(`${name}: not measured: ${reason}`)
    return { notMeasured: reason }
  }
}

async function main(): Promise<void> {
  const started = new Date()
  for (const line of machineLines()) console.log(line)
  // The machine may be shared: the load before and after says how much of it the bench had.
  const load = () => loadavg().map((l) => l.toFixed(2)).join(' ')
  console.log(`load average at start: ${load()}`)
  const limit = openFileLimit()
  // 10,000 idle streams need a descriptor each on both sides; children inherit this limit.
  const idleCount = limit !== undefined && limit.soft < IDLE + 1000 ? Math.max(0, limit.soft - 1000) : IDLE
  if (idleCount !== IDLE) console.log(`open files limit ${limit?.soft}: idle phase scaled to ${idleCount} streams`)

  const gw: BenchGateway = await startBenchGateway({ STREAM_MAX_PER_RENTAL: '1000', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' })
  console.log(`journal filesystem: ${filesystemOf(gw.dataDir)}`)
  const sampler = new ProcessSampler(gw.pid)
  const results: Record<string, unknown> = {}
  try {
    const sources = await benchSources(gw, 'del', SOURCES + 1)
    const replaySource = sources.pop()!
    const rentals = await benchRentals(gw, 'del', sources, RENTALS)
    console.log(`setup: ${SOURCES} sources, ${RENTALS} rentals (${RENTALS / SOURCES} per source), gateway RSS ${(sampler.endWindow().maxRssMb).toFixed(1)} MB`)

    if (SELECTED.has('idle')) results['idle'] = await phase('idle', () => idlePhase(gw, rentals, Math.floor(idleCount / RENTALS)))
    if (SELECTED.has('latency')) results['latency'] = await phase('latency', () => latencyPhase(gw, sampler, sources, rentals, SUBSCRIBERS_PER_RENTAL, PARSED_PER_RENTAL, RATE, SECONDS))
    if (SELECTED.has('replay')) results['replay'] = await phase('replay', async () => replayPhase(gw, replaySource, await benchRental(gw, 'del_replay', replaySource.sourceId), REPLAY))
    if (SELECTED.has('webhooks')) {
      const { receivers, urls } = await setWebhooks(gw, rentals)
      // Before the gateway's phases, with the gateway idle: what the HTTP exchange alone reaches here now.
      results['webhookCeiling'] = await phase('webhook receivers ceiling (no gateway)', () => receiverCeiling(urls, 3000))
      results['webhooks'] = await phase('webhooks', () => webhookPhase(gw, sampler, sources, rentals, receivers, WEBHOOK_SIGNALS, 0, 'wh'))
      results['webhooksFailingTenth'] = await phase('webhooks, a tenth failing', () => webhookPhase(gw, sampler, sources, rentals, receivers, WEBHOOK_SIGNALS, 11, 'whf'))
      await Promise.all(receivers.map((r) => r.close()))
      const ceiling = (results['webhookCeiling'] as { postsPerSecond?: number }).postsPerSecond
      if (ceiling !== undefined) {
        for (const k of ['webhooks', 'webhooksFailingTenth']) {
          const r = results[k] as { deliveriesPerSecond?: number; ratioToCeiling?: number }
          if (r.deliveriesPerSecond !== undefined) r.ratioToCeiling = Number((r.deliveriesPerSecond / ceiling).toFixed(2))
        }
        console.log(`webhooks / receivers' ceiling: ${(results['webhooks'] as any).ratioToCeiling}, a tenth failing: ${(results['webhooksFailingTenth'] as any).ratioToCeiling}`)
      }
    }
  } finally {
    sampler.stop()
    results['gatewayPeakRssMb'] = Number(sampler.peakMb.toFixed(1))
    console.log(`gateway peak RSS (VmHWM): ${sampler.peakMb.toFixed(1)} MB; stop: ${await gw.stop()}`)
    await gw.removeDataDir()
  }

  // On a gateway of its own, so its RSS and start time are those of the 10,000 webhooks.
  if (SELECTED.has('webhooks10k')) {
    results['webhooks10k'] = await phase(`webhooks, ${SCALE_RENTALS} rentals`, () => webhooksAtScale({ rentals: SCALE_RENTALS, sources: SCALE_SOURCES, receivers: 100, signals: SCALE_SIGNALS, env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, nodeArgs: GATEWAY_NODE_ARGS }))
  }

  const l = results['latency'] as any
  const i = results['idle'] as any
  const w = results['webhooks'] as any
  const wf = results['webhooksFailingTenth'] as any
  const verdict = (measured: unknown, ok: (v: number) => boolean) => (typeof measured === 'number' && Number.isFinite(measured) ? (ok(measured) ? 'met' : 'missed') : 'not measured')
  const goals = {
    sseP99: verdict(l?.acceptToReceive?.p99, (v) => v <= GOALS.sseP99Ms),
    idleBytesPerConnection: verdict(i?.bytesPerConnection, (v) => v <= GOALS.idleBytesPerConnection),
    webhookDeliveriesPerSecond: verdict(w?.deliveriesPerSecond, (v) => v >= GOALS.webhookDeliveriesPerSecond),
    webhookDeliveriesPerSecondTenthFailing: verdict(wf?.deliveriesPerSecond, (v) => v >= GOALS.webhookDeliveriesPerSecond),
    webhookDeliveriesPerSecondScale: verdict((results['webhooks10k'] as any)?.deliveriesPerSecond, (v) => v >= GOALS.webhookDeliveriesPerSecond),
  }
  console.log(`load average at end: ${load()}`)
  console.log(`goals: ${JSON.stringify(goals)}`)
  console.log(JSON.stringify({ bench: 'delivery', date: started.toISOString(), config: { sources: SOURCES, rentals: RENTALS, subscribersPerRental: SUBSCRIBERS_PER_RENTAL, parsedPerRental: PARSED_PER_RENTAL, rate: RATE, seconds: SECONDS, idle: idleCount, replay: REPLAY, webhookSignals: WEBHOOK_SIGNALS, phases: [...SELECTED], scaleRentals: SCALE_RENTALS, scaleSources: SCALE_SOURCES, scaleSignals: SCALE_SIGNALS }, goals, results }))
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
