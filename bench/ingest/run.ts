/**
 * Ingest benchmark (`npm run bench:ingest`): the gateway and a load generator run as
 * two processes on this machine; the single-core verify rate of sodium-native is
 * measured in the same run as the ceiling the accepted rate is compared with.
 *
 *   node dist/bench/ingest/run.js [--sweep] [--connections=N] [--cpu-prof=DIR] [GATEWAY_VAR=value ...]
 *
 * Without --sweep: warm-up, peak (closed loop), the latency floor (a bare uWS server
 * paced at the half-peak rate, floor-server.ts), half peak (open loop, paced),
 * overload (2,000 connections); prints every phase, the targets, and last a line of
 * JSON. With --sweep: see sweep.ts. Parameters: options.ts.
 */
import { LatencyHistogram } from './histogram.js'
import { machineLines, openFileLimit } from './machine-info.js'
import {
  closedSpec,
  CONNECTIONS,
  GATEWAY_ENV,
  MIN_BUDGET_RATE,
  OVERLOAD_BUDGET_PER_PEAK,
  OVERLOAD_CONNECTIONS,
  peakBudgetRate,
  PHASE_MS,
  SOURCES,
  SPARE_FDS,
  SWEEP_MODE,
  TARGETS,
  WARM_UP_BUDGET_PER_CEILING,
} from './options.js'
import { formatMs, formatRate, targetLine } from './report.js'
import { ceiling, print, withSession } from './session.js'
import { sweepRun } from './sweep.js'

async function fullRun(ceilingBefore: number): Promise<void> {
  const limit = openFileLimit()
  const overloadConnections = limit === undefined ? OVERLOAD_CONNECTIONS : Math.min(OVERLOAD_CONNECTIONS, limit.soft - SPARE_FDS)
  if (overloadConnections < OVERLOAD_CONNECTIONS) {
    print(`WARNING: open files limit ${limit?.soft} allows only ${overloadConnections} overload connections; raise it with ulimit -n ${OVERLOAD_CONNECTIONS + SPARE_FDS}`)
  }
  print(
    `bench: ${SOURCES} sources; warm-up ${PHASE_MS.warmUp / 1000} s and peak ${PHASE_MS.peak / 1000} s closed loop on ${CONNECTIONS} connections;` +
      ` half peak ${PHASE_MS.halfPeak / 1000} s open loop on ${CONNECTIONS}; overload ${PHASE_MS.overload / 1000} s closed loop on ${overloadConnections}`,
  )
  const phases = await withSession(GATEWAY_ENV, async (s) => {
    print()
    const warm = await s.phase(closedSpec('warm-up', CONNECTIONS, PHASE_MS.warmUp, ceilingBefore * WARM_UP_BUDGET_PER_CEILING))
    const peak = await s.phase(closedSpec('peak', CONNECTIONS, PHASE_MS.peak, peakBudgetRate(warm, ceilingBefore)))
    const halfRate = Math.max(1, Math.round(peak.acceptedPerS / 2))
    const halfSpec = {
      name: 'half-peak',
      mode: 'open',
      connections: CONNECTIONS,
      durationMs: PHASE_MS.halfPeak,
      ratePerS: halfRate,
      budget: Math.ceil((halfRate * PHASE_MS.halfPeak) / 1000) + CONNECTIONS,
    } as const
    // Right before the half-peak phase, so that both see the same neighbours on the machine.
    const floor = await s.floor({ ...halfSpec, name: 'latency floor' })
    const half = await s.phase(halfSpec)
    const overloadRate = Math.max(peak.acceptedPerS, MIN_BUDGET_RATE) * OVERLOAD_BUDGET_PER_PEAK
    const overload = await s.phase(closedSpec('overload', overloadConnections, PHASE_MS.overload, overloadRate))
    return { peak, floor, half, overload, peakRssMb: s.sampler.peakMb }
  })
  print()
  const ceilingAfter = await ceiling('after')
  const verifyCeiling = Math.max(ceilingBefore, ceilingAfter)
  const { peak, floor, half, overload, peakRssMb } = phases
  const ratio = peak.acceptedPerS / verifyCeiling
  const overloadAccepted = new LatencyHistogram(overload.result.acceptedLatency)
  const overloadOthers = Object.entries(overload.result.statuses).filter(([s]) => s !== '202' && s !== '503')
  print()
  print(`summary: peak ${formatRate(peak.acceptedPerS)} accepted/s; verify ceiling ${formatRate(verifyCeiling)}/s (max of ${formatRate(ceilingBefore)} before, ${formatRate(ceilingAfter)} after); ratio ${ratio.toFixed(3)}`)
  print(`  half peak (${formatRate(half.result.sent / (half.result.windowMs / 1000))}/s paced): p50 ${formatMs(half.p50)} ms, p99 ${formatMs(half.p99)} ms, p99.9 ${formatMs(half.p999)} ms`)
  print(`  latency floor at the same rate (bare uWS, same load generator, just before): p50 ${formatMs(floor.p50)} ms, p99 ${formatMs(floor.p99)} ms`)
  print(`  overload (${overload.result.connections} connections): 202 ${formatRate(overload.result.statuses['202'] ?? 0)}, 503 ${formatRate(overload.shed)}, accepted p99 ${formatMs(overload.p99)} ms; gateway peak RSS ${peakRssMb.toFixed(0)} MB`)
  print('targets (2-core machine, load generator included):')
  print(targetLine(`ratio >= ${TARGETS.ratio}`, ratio >= TARGETS.ratio, `${ratio.toFixed(3)} = ${formatRate(peak.acceptedPerS)} / ${formatRate(verifyCeiling)}`))
  print(targetLine(`p99 <= ${TARGETS.p99Ms} ms at half peak`, half.p99 <= TARGETS.p99Ms && half.result.unanswered === 0, `${formatMs(half.p99)} ms, ${half.result.unanswered} unanswered`))
  const shedOk = overload.shed > 0 && overload.result.shedWithoutRetryAfter === 0 && overloadOthers.length === 0 && overload.result.dropped === 0
  print(
    targetLine(
      `${overload.result.connections} connections shed with 503 + Retry-After`,
      shedOk && overload.result.connections >= OVERLOAD_CONNECTIONS,
      overload.shed === 0
        ? `no 503 at all: the gateway queued instead (accepted latency p50 ${formatMs(overload.p50)} ms, p99 ${formatMs(overload.p99)} ms)`
        : `${formatRate(overload.shed)} × 503, ${overload.result.shedWithoutRetryAfter} without Retry-After, ${overload.result.dropped} dropped, other statuses ${overloadOthers.length === 0 ? 'none' : JSON.stringify(Object.fromEntries(overloadOthers))}` +
            `; the accepted ones still waited p50 ${formatMs(overloadAccepted.quantileMs(0.5))} ms, p99 ${formatMs(overloadAccepted.quantileMs(0.99))} ms`,
    ),
  )
  print(targetLine(`RSS < ${TARGETS.rssMb} MB`, peakRssMb < TARGETS.rssMb, `peak VmHWM ${peakRssMb.toFixed(1)} MB over the whole run`))
  print(
    JSON.stringify({
      accepted_per_s: Math.round(peak.acceptedPerS),
      verify_ceiling_per_s: Math.round(verifyCeiling),
      ratio: Number(ratio.toFixed(3)),
      p99_ms: Number(half.p99.toFixed(2)),
      peak_rss_mb: Number(peakRssMb.toFixed(1)),
    }),
  )
}

async function main(): Promise<void> {
  for (const line of machineLines()) print(line)
  if (Object.keys(GATEWAY_ENV).length > 0) print(`gateway environment overrides: ${JSON.stringify(GATEWAY_ENV)}`)
  const ceilingBefore = await ceiling('before')
  if (SWEEP_MODE) await sweepRun(ceilingBefore)
  else await fullRun(ceilingBefore)
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
  process.exitCode = 1
})
