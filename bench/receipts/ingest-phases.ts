import { loadConfig } from '../../config/index.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { acceptLatencyBuckets, bucketQuantile } from '../ingest/gateway-metrics.js'
import { LoadGeneratorProcess } from '../ingest/load-generator-process.js'
import { ProcessSampler } from '../ingest/process-sampler.js'
import type { PhaseSpec } from '../ingest/protocol.js'
import { provisionSources } from '../ingest/provision.js'
import { figures, phaseLines, type PhaseFigures } from '../ingest/report.js'
import { httpExport, type HttpTarget } from './http-reads.js'
import { lagFigures, LagSampler, type LagFigures } from './recorder-lag.js'

/**
 * The phases that put signed ingest on the gateway that holds the seeded receipts, with the
 * ingest benchmark's own machinery (bench/ingest/: sources provisioned through the control
 * plane, a separate load-generator process sending pre-signed requests over raw keep-alive
 * connections, latency of open-loop phases from the scheduled send time):
 *
 * - the recorder's lag at the peak: the ingest benchmark's warm-up (3 s) and peak (10 s,
 *   closed loop on 256 connections) phases, with the lag read every 100 ms from the peak's
 *   start until the recorder has caught up;
 * - ingest latency with and without an export: open loop paced at half the peak just
 *   measured (the ingest benchmark's half-peak phase, longer), once alone and once while
 *   NDJSON exports of the whole receipts table run back to back through HTTP.
 *
 * The recorder runs in the gateway throughout, as it does in service: every accepted
 * signal is recorded into the same table the exports read.
 */

// As the ingest benchmark's (bench/ingest/options.ts, which reads that benchmark's own
// command line, so it is not imported here): sources, connections, phase lengths, budgets.
const SOURCES = 16
const CONNECTIONS = 256
const PHASE_MS = { warmUp: 3_000, peak: 10_000 }
const MIN_BUDGET_RATE = 2_000
/** Requests pre-signed for the warm-up: above what two cores accept in 3 s; running out ends the window early, visibly. */
const WARM_UP_BUDGET_RATE = 20_000
const PEAK_BUDGET_PER_WARM_UP = 1.6
const CATCH_UP_TIMEOUT_MS = 60_000

export interface IngestPhaseFigures {
  readonly accepted_per_s: number
  readonly rate_per_s: number
  readonly p50_ms: number
  readonly p99_ms: number
  readonly p999_ms: number
  readonly unanswered: number
  readonly non_202: number
  /** The gateway's own accept-latency histogram (arrival to 202), bucket bounds. */
  readonly gateway_p99_le_ms: number
  readonly gateway_cores: number
  readonly recorder_lag: LagFigures
}

export interface IngestPhasesResult {
  readonly recorder_at_peak: {
    readonly accepted_per_s: number
    readonly window_s: number
    readonly lag_during_peak: LagFigures
    readonly lag_max_s: number
    readonly catch_up_s: number | null
    readonly catch_up_note?: string
    readonly gateway_cores: number
  }
  readonly half_rate_per_s: number
  readonly ingest_without_export: IngestPhaseFigures
  readonly ingest_with_export: IngestPhaseFigures & { readonly export: { readonly exports: number; readonly rows: number; readonly s: number; readonly rows_per_s: number; readonly gateway_rss_peak_mb: number } }
}

const closedSpec = (name: string, durationMs: number, ratePerS: number): PhaseSpec => ({ name, mode: 'closed', connections: CONNECTIONS, durationMs, budget: Math.ceil((ratePerS * durationMs) / 1000) })
const round2 = (x: number) => Number(x.toFixed(2))

export async function ingestPhases(gw: LaunchedGateway, o: { halfPeakMs: number }, print: (line?: string) => void): Promise<IngestPhasesResult> {
  const tag = Date.now().toString(36)
  const sources = await provisionSources({ ...gw, config: loadConfig(gw.env) }, tag, SOURCES)
  print(`  ${SOURCES} sources provisioned through the control plane, each with its own active Ed25519 key`)
  const lg = await LoadGeneratorProcess.start(gw.port, sources, tag)
  const sampler = new ProcessSampler(gw.pid)
  const lag = new LagSampler(gw.url)
  const target: HttpTarget = { url: gw.url, adminToken: gw.adminToken, pid: gw.pid }
  try {
    /** One phase; `during` runs from the window's start and is told when the window ends. */
    async function phase(spec: PhaseSpec, during?: (windowEnd: Promise<void>) => Promise<unknown>) {
      const before = await acceptLatencyBuckets(gw)
      let startedAt = 0
      let usage: ReturnType<ProcessSampler['endWindow']> | undefined
      let sideTask: Promise<unknown> | undefined
      let endWindow: () => void = () => {}
      const windowEnd = new Promise<void>((resolve) => (endWindow = resolve))
      let timer: NodeJS.Timeout | undefined
      const result = await lg.phase(spec, () => {
        startedAt = lag.now()
        sampler.beginWindow()
        sideTask = during?.(windowEnd)
        timer = setTimeout(() => {
          usage = sampler.endWindow()
          endWindow()
        }, spec.durationMs)
      })
      clearTimeout(timer)
      endWindow()
      const side = await sideTask
      const endedAt = startedAt + result.windowMs
      const f = figures(result, usage ?? sampler.endWindow())
      for (const line of phaseLines(f)) print(line)
      const after = await acceptLatencyBuckets(gw)
      const gatewayP99 = bucketQuantile(before, after, 0.99)
      print(`  inside the gateway (its /metrics histogram, arrival to 202): p50 ≤ ${bucketQuantile(before, after, 0.5)} ms, p99 ≤ ${gatewayP99} ms`)
      return { f, startedAt, endedAt, gatewayP99, side }
    }
    const settle = async (what: string) => {
      const at = await lag.caughtUp(lag.now(), CATCH_UP_TIMEOUT_MS)
      if (at === undefined) print(`  WARNING: the recorder had not caught up ${CATCH_UP_TIMEOUT_MS / 1000} s after ${what}`)
    }
    const ingestFigures = (p: { f: PhaseFigures; startedAt: number; endedAt: number; gatewayP99: number }, rate: number): IngestPhaseFigures => ({
      accepted_per_s: Math.round(p.f.acceptedPerS),
      rate_per_s: rate,
      p50_ms: round2(p.f.p50),
      p99_ms: round2(p.f.p99),
      p999_ms: round2(p.f.p999),
      unanswered: p.f.result.unanswered,
      non_202: Object.entries(p.f.result.statuses).reduce((n, [s, c]) => n + (s === '202' ? 0 : c), 0),
      gateway_p99_le_ms: p.gatewayP99,
      gateway_cores: round2(p.f.usage.mainCores + p.f.usage.otherCores),
      recorder_lag: lagFigures(lag.samples, p.startedAt, p.endedAt),
    })

    print()
    print('recorder lag at the ingest peak (the ingest benchmark\'s warm-up and peak phases, recorder on):')
    const warm = await phase(closedSpec('warm-up', PHASE_MS.warmUp, WARM_UP_BUDGET_RATE))
    await settle('the warm-up')
    const peakRate = Math.max(MIN_BUDGET_RATE, warm.f.acceptedPerS * PEAK_BUDGET_PER_WARM_UP)
    const peak = await phase(closedSpec('peak', PHASE_MS.peak, peakRate))
    const caughtUpAt = await lag.caughtUp(peak.endedAt, CATCH_UP_TIMEOUT_MS)
    const duringPeak = lagFigures(lag.samples, peak.startedAt, peak.endedAt)
    const overall = lagFigures(lag.samples, peak.startedAt, caughtUpAt ?? lag.now())
    const catchUpS = caughtUpAt === undefined ? null : round2((caughtUpAt - peak.endedAt) / 1000)
    print(
      `  recorder lag over the peak window (${duringPeak.samples} samples, 100 ms apart): p50 ${duringPeak.p50_s} s, p99 ${duringPeak.p99_s} s, max ${duringPeak.max_s} s, at most ${duringPeak.max_records.toLocaleString()} records behind;` +
        ` max ${overall.max_s} s until caught up; caught up ${catchUpS === null ? `NOT within ${CATCH_UP_TIMEOUT_MS / 1000} s` : `${catchUpS} s after the window ended`}`,
    )
    const recorderAtPeak = {
      accepted_per_s: Math.round(peak.f.acceptedPerS),
      window_s: round2(peak.f.result.windowMs / 1000),
      lag_during_peak: duringPeak,
      lag_max_s: overall.max_s,
      catch_up_s: catchUpS,
      ...(catchUpS === null && { catch_up_note: `not caught up within ${CATCH_UP_TIMEOUT_MS / 1000} s of the window's end` }),
      gateway_cores: round2(peak.f.usage.mainCores + peak.f.usage.otherCores),
    }

    const halfRate = Math.max(1, Math.round(peak.f.acceptedPerS / 2))
    const halfSpec = (name: string): PhaseSpec => ({ name, mode: 'open', connections: CONNECTIONS, durationMs: o.halfPeakMs, ratePerS: halfRate, budget: Math.ceil((halfRate * o.halfPeakMs) / 1000) + CONNECTIONS })
    print()
    print(`ingest at half the peak (${halfRate.toLocaleString()}/s, open loop, ${o.halfPeakMs / 1000} s), without and then with NDJSON exports of the whole table running through HTTP:`)
    await settle('the peak')
    const alone = await phase(halfSpec('half peak, no export'))
    await settle('the half-peak phase')
    const withExport = await phase(halfSpec('half peak, export running'), async (windowEnd) => {
      const stop = new AbortController()
      void windowEnd.then(() => stop.abort())
      let exports = 0
      let rows = 0
      let rssPeak = 0
      const t = performance.now()
      while (!stop.signal.aborted) {
        const e = await httpExport(target, 'ndjson', {}, stop.signal)
        exports++
        rows += e.rows
        rssPeak = Math.max(rssPeak, e.gateway_rss_mb.peak_mb)
      }
      const s = (performance.now() - t) / 1000
      return { exports, rows, s: round2(s), rows_per_s: Math.round(rows / s), gateway_rss_peak_mb: rssPeak }
    })
    const exp = withExport.side as IngestPhasesResult['ingest_with_export']['export']
    print(`  exports during the window: ${exp.exports} started, ${exp.rows.toLocaleString()} rows in ${exp.s} s = ${exp.rows_per_s.toLocaleString()} rows/s (the last one cut at the window's end); gateway RSS peak ${exp.gateway_rss_peak_mb} MB`)
    await settle('the export phase')
    return {
      recorder_at_peak: recorderAtPeak,
      half_rate_per_s: halfRate,
      ingest_without_export: ingestFigures(alone, halfRate),
      ingest_with_export: { ...ingestFigures(withExport, halfRate), export: exp },
    }
  } finally {
    await lag.stop()
    sampler.stop()
    await lg.close()
  }
}
