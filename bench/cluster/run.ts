/**
 * `npm run bench:cluster [-- --quick] [-- --single-nats]`: the gateway as a cluster on NATS,
 * against the embedded gateway and one core's verify rate measured in the same run.
 *
 *  1. Embedded: one process, `ROLE=all` and then `ROLE=gateway`, the ingest benchmark's
 *     load (the same load generator, 256 connections, warm-up then a closed-loop peak);
 *     the recorder's lag in the `ROLE=all` process during its peak.
 *  2. On NATS (three nats-servers with JetStream, R3; one with `--single-nats`): a
 *     recorder, a delivery process and one gateway, each its own process. The gateway's
 *     peak; the recorder's lag meanwhile; the NATS servers' RSS and CPU.
 *  3. A second gateway: the load split over both; the same figures.
 *  4. Revocation: from a key revocation's 200 on one gateway to its refusal on the other.
 *  5. SSE with delivery in its own process: 1,000 streams, 1,000 signals/s pushed to a gateway.
 *  6. Half the one-gateway peak (open loop), alone and while NDJSON exports of every receipt
 *     run back to back from the recorder process.
 *  Then the capacity model (capacity-model.ts) from the per-process rates measured, and a
 *  last line of JSON with every figure.
 */
import { randomBytes } from 'node:crypto'
import { loadavg } from 'node:os'
import { setTimeout as sleep } from 'node:timers/promises'
import { startNatsCluster, startNatsServer, type NatsCluster } from '../../harness/nats-launcher.js'
import { latencyPhase } from '../delivery/phases.js'
import { benchRentals, benchSources } from '../delivery/setup.js'
import type { BenchGateway } from '../ingest/gateway-process.js'
import { machineLines } from '../ingest/machine-info.js'
import { ProcessSampler } from '../ingest/process-sampler.js'
import { provisionSources } from '../ingest/provision.js'
import { closeHttp, httpExport } from '../receipts/http-reads.js'
import { closeLagAgent, LagSampler, lagFigures } from '../receipts/recorder-lag.js'
import { measureVerifyRate } from '../verify-ceiling.js'
import { plan, type MeasuredRates } from './capacity-model.js'
import { Load, type LoadFigures } from './load.js'
import { NatsRssSampler } from './nats-rss.js'
import { GOALS, PHASE_MS, QUICK, REVOCATIONS, SINGLE_NATS, SOURCES, SSE } from './options.js'
import { startRole, stopAll } from './processes.js'
import { revocationPhase } from './revocation.js'

/** Cores the capacity model gives each gateway, recorder and delivery process: the machine measured. */
const CORES_PER_PROCESS = 2
const print = (line = '') => process.stdout.write(`${line}\n`)
const rate = (n: number) => Math.round(n).toLocaleString('en-US')
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ')
const tag = Date.now().toString(36)
const started: BenchGateway[] = []
let nats: NatsCluster | undefined

async function launch(role: 'all' | 'gateway' | 'recorder' | 'delivery', adminToken: string, env: Record<string, string> = {}): Promise<BenchGateway> {
  const p = await startRole(role, adminToken, env)
  started.push(p)
  return p
}

interface Window {
  lag?: ReturnType<typeof lagFigures> & { caughtUpAfterS: number | null }
  recorderCores?: number
  natsCores?: number[]
  natsRssBeforeMb?: number
  natsRssPeakMb?: number
}

/** Samples the recorder and the NATS servers over a load phase's timed window. */
function windowProbe(lag: LagSampler | undefined, recorderPid: number | undefined, natsPids: readonly number[], rss: NatsRssSampler | undefined, out: Window) {
  return async (windowStarted: Promise<void>) => {
    const rec = recorderPid === undefined ? undefined : new ProcessSampler(recorderPid)
    const servers = natsPids.map((pid) => new ProcessSampler(pid))
    await windowStarted
    const t0 = lag?.now() ?? 0
    rec?.beginWindow()
    for (const s of servers) s.beginWindow()
    out.natsRssBeforeMb = rss?.sumMb()
    rss?.takePeakMb()
    await sleep(PHASE_MS.peak)
    const t1 = lag?.now() ?? 0
    if (rec) {
      const u = rec.endWindow()
      out.recorderCores = u.mainCores + u.otherCores
      rec.stop()
    }
    out.natsCores = servers.map((s) => {
      const u = s.endWindow()
      s.stop()
      return u.mainCores + u.otherCores
    })
    out.natsRssPeakMb = rss?.takePeakMb()
    if (lag) {
      const caught = await lag.caughtUp(t1, 60_000)
      out.lag = { ...lagFigures(lag.samples, t0, t1), caughtUpAfterS: caught === undefined ? null : Number(((caught - t1) / 1000).toFixed(1)) }
    }
  }
}

function loadLine(name: string, f: LoadFigures, ceiling: number, w: Window = {}): void {
  print(`${name}: ${rate(f.acceptedPerS)} accepted/s (${f.perGateway.map(rate).join(' + ')}), ${(f.acceptedPerS / ceiling).toFixed(3)} of the verify ceiling; p50 ${f.p50Ms.toFixed(1)} ms, p99 ${f.p99Ms.toFixed(1)} ms; statuses ${JSON.stringify(f.statuses)}; gateway cores ${f.gatewayCores.map((c) => c.toFixed(2)).join(', ')}`)
  if (w.lag) print(`  recorder lag: p50 ${w.lag.p50_s} s, p99 ${w.lag.p99_s} s, max ${w.lag.max_s} s (${w.lag.samples} samples, at most ${w.lag.max_records} records behind); caught up ${w.lag.caughtUpAfterS ?? 'not within 60'} s after the window`)
  if (w.recorderCores !== undefined) print(`  recorder process: ${w.recorderCores.toFixed(2)} cores`)
  if (w.natsCores && w.natsCores.length > 0) print(`  NATS servers: ${w.natsCores.map((c) => c.toFixed(2)).join(', ')} cores; RSS ${w.natsRssBeforeMb?.toFixed(0)} MB before, ${w.natsRssPeakMb?.toFixed(0)} MB at the peak (all servers)`)
}

async function main(): Promise<void> {
  for (const line of machineLines()) print(line)
  print(`load average at the start: ${load()}${QUICK ? '; --quick: short phases, figures not the benchmark\'s' : ''}`)
  const ceilingBefore = await measureVerifyRate('sodium-native', 3_000)
  print(`verify ceiling (before): ${rate(ceilingBefore)} verifies/s on one core`)
  const adminToken = `admin_${randomBytes(16).toString('hex')}`
  const json: Record<string, unknown> = { quick: QUICK, load_average_start: loadavg()[0] }

  // 1. Embedded.
  const embedded: Record<string, LoadFigures & Window> = {}
  for (const role of ['all', 'gateway'] as const) {
    const gw = await launch(role, adminToken)
    const sources = await provisionSources(gw, `${tag}e${role}`, SOURCES)
    const lg = await Load.start([gw], sources, `${tag}e${role}`)
    const lag = role === 'all' ? new LagSampler(gw.url) : undefined
    const w: Window = {}
    const f = await lg.peak(ceilingBefore, windowProbe(lag, undefined, [], undefined, w))
    await lag?.stop()
    await lg.close()
    loadLine(`embedded, ROLE=${role}, peak`, f, ceilingBefore, w)
    embedded[role] = { ...f, ...w }
    await stopAll([gw])
    started.splice(started.indexOf(gw), 1)
  }
  print(`  ROLE=all keeps ${(embedded.all!.acceptedPerS / embedded.gateway!.acceptedPerS).toFixed(3)} of ROLE=gateway's accepted rate`)

  // 2. NATS, one gateway.
  nats = SINGLE_NATS ? await startNatsServer() : await startNatsCluster()
  const natsPids = nats.nodes.map((n) => n.pid()!).filter((p) => p !== undefined)
  print(`NATS: ${nats.nodes.length} nats-server${nats.nodes.length > 1 ? 's (one JetStream cluster, R3)' : ' (R1)'}`)
  const env = { NATS_URL: nats.urls, NATS_REPLICAS: SINGLE_NATS ? '1' : '3' }
  // One at a time: the first creates the streams and buckets.
  const gwA = await launch('gateway', adminToken, env)
  const recorder = await launch('recorder', adminToken, env)
  const delivery = await launch('delivery', adminToken, env)
  const sources = await provisionSources(gwA, `${tag}n`, SOURCES)
  const rss = new NatsRssSampler(natsPids)
  const lag = new LagSampler(recorder.url)
  let lg = await Load.start([gwA], sources, `${tag}n1`)
  const one: Window = {}
  const oneF = await lg.peak(ceilingBefore, windowProbe(lag, recorder.pid, natsPids, rss, one))
  await lg.close()
  loadLine('NATS, one gateway, peak', oneF, ceilingBefore, one)

  // 3. Two gateways.
  const gwB = await launch('gateway', adminToken, env)
  lg = await Load.start([gwA, gwB], sources, `${tag}n2`)
  const two: Window = {}
  const twoF = await lg.peak(ceilingBefore, windowProbe(lag, recorder.pid, natsPids, rss, two))
  await lg.close()
  loadLine('NATS, two gateways, peak', twoF, ceilingBefore, two)

  // 4. Revocation.
  const revocation = await revocationPhase(gwA, gwB, REVOCATIONS, tag)
  print(`revocation on one gateway to refusal on the other (${revocation.trials} trials): p50 ${revocation.p50Ms.toFixed(1)} ms, p99 ${revocation.p99Ms.toFixed(1)} ms, max ${revocation.maxMs.toFixed(1)} ms; accepted after the 200: ${revocation.acceptedAfterAck}; refused with ${revocation.refusal}`)

  // 5. SSE through the delivery process.
  const sseSources = await benchSources(gwA, `${tag}s`, SSE.sources)
  const rentals = await benchRentals(gwA, `${tag}s`, sseSources, SSE.rentals)
  // The rentals reach the delivery process through the rentals bucket's watch.
  await sleep(500)
  const deliverySampler = new ProcessSampler(delivery.pid)
  const sse = await latencyPhase(delivery, deliverySampler, sseSources, rentals, SSE.perRental, 1, SSE.rate, SSE.seconds, gwA)
  deliverySampler.stop()
  print(
    `SSE, delivery in its own process: ${sse.subscribers} streams, ${SSE.rate} signals/s for ${SSE.seconds} s (${sse.signalsAccepted} accepted), ${sse.received}/${sse.expectedDeliveries} timed events;` +
      ` accept-to-receive p50 ${sse.acceptToReceive.p50} ms, p99 ${sse.acceptToReceive.p99} ms; delivery ${sse.gatewayCores} cores, ${sse.gatewayCpuMsPer1000Events.all} ms CPU per 1,000 events`,
  )

  // 6. Half peak, alone and with exports on the recorder process.
  lg = await Load.start([gwA], sources, `${tag}h`)
  const halfRate = Math.max(1, Math.round(oneF.acceptedPerS / 2))
  const alone = await lg.paced(halfRate)
  loadLine(`NATS, one gateway, half peak (${rate(halfRate)}/s paced), alone`, alone, ceilingBefore)
  const exports: { rows: number; rows_per_s: number }[] = []
  const withExport = await lg.paced(halfRate, async (windowStarted) => {
    await windowStarted
    const stop = AbortSignal.timeout(PHASE_MS.halfPeak)
    while (!stop.aborted) {
      const e = await httpExport({ url: recorder.url, adminToken, pid: recorder.pid }, 'ndjson', {}, stop)
      exports.push(e)
    }
  })
  await lg.close()
  loadLine(`NATS, one gateway, half peak, exports running on the recorder process`, withExport, ceilingBefore)
  print(`  exports: ${exports.length} (NDJSON of every receipt), ${rate(exports.reduce((a, e) => a + e.rows, 0))} rows in all`)
  const natsRssMb = rss.sumMb()
  rss.stop()
  await lag.stop()

  const ceilingAfter = await measureVerifyRate('sodium-native', 3_000)
  const ceiling = Math.max(ceilingBefore, ceilingAfter)
  print(`verify ceiling (after): ${rate(ceilingAfter)} verifies/s; ceiling used: ${rate(ceiling)}; load average at the end: ${load()}`)

  // The capacity model, from the per-process figures of this run.
  const replicas = SINGLE_NATS ? 1 : 3
  const peakSignals = twoF.acceptedPerS * (PHASE_MS.peak / 1000)
  // Rates per core-second of CPU each process used, times the cores a process is given:
  // on a shared machine a process gets a varying share of the cores, while the CPU time an
  // accepted signal costs moves much less.
  const perCore = (work: number, cores: number | undefined) => work / Math.max(0.01, cores ?? 1)
  const measured: MeasuredRates = {
    gatewayPerProcess: perCore(oneF.acceptedPerS, oneF.gatewayCores[0]) * CORES_PER_PROCESS,
    recorderPerProcess: perCore(twoF.acceptedPerS, two.recorderCores) * CORES_PER_PROCESS,
    deliveryEventsPerProcess: (1e6 / Math.max(0.001, sse.gatewayCpuMsPer1000Events.all)) * CORES_PER_PROCESS,
    streamLeaderPerCore: twoF.acceptedPerS / Math.max(0.01, ...(two.natsCores ?? [1])),
    natsBytesPerSignalHeld: Math.max(0, ((two.natsRssPeakMb ?? 0) - (two.natsRssBeforeMb ?? 0)) * 2 ** 20) / Math.max(1, peakSignals) / Math.min(replicas, nats.nodes.length),
    clickhouseInsertUsPerReceipt: ((two.recorderCores ?? 0) / Math.max(1, twoF.acceptedPerS)) * 1e6,
  }
  const assumptions = { fanOut: 10, dedupWindowS: 1800, replicas: 3, natsMemoryBytes: 32 * 2 ** 30, clickhouseInsertCores: 16 }
  print()
  print(`capacity model (a process given ${CORES_PER_PROCESS} cores; rates from the CPU time each process used per signal): per process ${JSON.stringify(Object.fromEntries(Object.entries(measured).map(([k, v]) => [k, Math.round(v)])))}; assumptions ${JSON.stringify(assumptions)}`)
  const plans = [100_000, 1_000_000].map((target) => plan(target, measured, assumptions))
  for (const p of plans) {
    print(
      `  ${rate(p.targetPerS)} signals/s: ${p.gateways} gateways, ${p.recorders} recorders, ${p.delivery} delivery processes, ${p.natsServers} NATS servers, ${p.signalStreams} signal streams;` +
        ` dedup ${(p.dedupBytesPerServer / 2 ** 30).toFixed(1)} GiB per NATS server; ClickHouse inserts ${p.clickhouseInsertCores.toFixed(1)} cores; first bound: ${p.bounds[0]!.what} (${p.bounds[0]!.ratio.toFixed(1)}× one)`,
    )
  }

  const goals = {
    nats_ratio: [oneF.acceptedPerS / ceiling, GOALS.natsRatio],
    recorder_lag_p99_s: [two.lag?.p99_s ?? null, GOALS.recorderLagP99S],
    sse_p99_ms: [sse.acceptToReceive.p99, GOALS.sseP99Ms],
    half_peak_with_export_p99_ms: [withExport.p99Ms, GOALS.halfPeakWithExportP99Ms],
    revocation_p99_ms: [revocation.p99Ms, GOALS.revocationP99Ms],
  }
  print('goals:')
  for (const [name, [got, goal]] of Object.entries(goals)) {
    const met = got !== null && (name === 'nats_ratio' ? (got as number) >= (goal as number) : (got as number) <= (goal as number))
    print(`  ${met ? 'MET   ' : 'MISSED'} ${name}: ${typeof got === 'number' ? Number(got.toFixed(3)) : got} (goal ${name === 'nats_ratio' ? '>=' : '<='} ${goal})`)
  }
  const r = (f: LoadFigures) => ({ accepted_per_s: Math.round(f.acceptedPerS), ratio: Number((f.acceptedPerS / ceiling).toFixed(3)), p99_ms: Number(f.p99Ms.toFixed(2)), gateway_cores: f.gatewayCores.map((c) => Number(c.toFixed(2))) })
  Object.assign(json, {
    verify_ceiling_per_s: Math.round(ceiling),
    embedded_all: { ...r(embedded.all!), recorder_lag: embedded.all!.lag },
    embedded_gateway: r(embedded.gateway!),
    all_over_gateway: Number((embedded.all!.acceptedPerS / embedded.gateway!.acceptedPerS).toFixed(3)),
    nats_servers: nats.nodes.length,
    nats_one_gateway: { ...r(oneF), recorder_lag: one.lag, recorder_cores: one.recorderCores, nats_cores: one.natsCores, nats_rss_mb: one.natsRssPeakMb },
    nats_two_gateways: { ...r(twoF), recorder_lag: two.lag, recorder_cores: two.recorderCores, nats_cores: two.natsCores, nats_rss_mb: two.natsRssPeakMb },
    nats_rss_mb_per_1000_signals_per_s: Number((((two.natsRssPeakMb ?? natsRssMb) / twoF.acceptedPerS) * 1000).toFixed(2)),
    revocation,
    sse: { streams: sse.subscribers, accept_to_receive: sse.acceptToReceive, delivery_cores: sse.gatewayCores, cpu_ms_per_1000_events: sse.gatewayCpuMsPer1000Events },
    half_peak: { rate_per_s: halfRate, alone: r(alone), with_export: { ...r(withExport), exports: exports.length } },
    capacity: { measured, assumptions, plans },
    load_average_end: loadavg()[0],
  })
  print(JSON.stringify(json))
}

async function cleanup(): Promise<void> {
  await stopAll(started.reverse()).catch(() => undefined)
  await nats?.close()
  await closeLagAgent()
  await closeHttp()
}

process.once('SIGINT', () => void cleanup().then(() => process.exit(130)))
main()
  .catch((err: unknown) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
    for (const p of started) if (p.output.length > 0) process.stderr.write(`${p.env['ROLE']} output (last lines):\n${p.output.slice(-10).join('\n')}\n`)
    process.exitCode = 1
  })
  .finally(cleanup)
