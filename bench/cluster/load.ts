import { LoadGeneratorProcess } from '../ingest/load-generator-process.js'
import { BUCKETS, LatencyHistogram } from '../ingest/histogram.js'
import { ProcessSampler } from '../ingest/process-sampler.js'
import type { PhaseResult, PhaseSpec, SourceKey } from '../ingest/protocol.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { BUDGET_PER_CEILING, CONNECTIONS, PHASE_MS } from './options.js'

/**
 * The ingest benchmark's load generator (bench/ingest/load-generator.ts: pre-signed
 * requests over raw keep-alive connections) against one or more gateways at once, the
 * 256 connections split evenly between them, one load-generator process per gateway.
 */

export interface LoadFigures {
  readonly acceptedPerS: number
  /** Per gateway, in the order given. */
  readonly perGateway: readonly number[]
  readonly statuses: Record<string, number>
  readonly p50Ms: number
  readonly p99Ms: number
  readonly unanswered: number
  /** Cores each gateway used over the window (all threads). */
  readonly gatewayCores: readonly number[]
}

interface Target {
  readonly gw: LaunchedGateway
  readonly lg: LoadGeneratorProcess
  readonly sampler: ProcessSampler
}

export class Load {
  readonly #targets: readonly Target[]

  private constructor(targets: readonly Target[]) {
    this.#targets = targets
  }

  static async start(gateways: readonly LaunchedGateway[], sources: SourceKey[], tag: string): Promise<Load> {
    const targets: Target[] = []
    for (const [i, gw] of gateways.entries()) targets.push({ gw, lg: await LoadGeneratorProcess.start(gw.port, sources, `${tag}g${i}`), sampler: new ProcessSampler(gw.pid) })
    return new Load(targets)
  }

  /** Warm-up then the closed-loop peak; returns the peak. `during` runs beside the peak's window. */
  async peak(ceiling: number, during?: (windowStarted: Promise<void>) => Promise<void>): Promise<LoadFigures> {
    await this.#run('warm-up', 'closed', PHASE_MS.warmUp, ceiling)
    return this.#run('peak', 'closed', PHASE_MS.peak, ceiling, undefined, during)
  }

  /** Open loop at `ratePerS` in all (paced, latency from the scheduled send), as the ingest benchmark's half-peak phase. */
  paced(ratePerS: number, during?: (windowStarted: Promise<void>) => Promise<void>): Promise<LoadFigures> {
    return this.#run('half peak', 'open', PHASE_MS.halfPeak, ratePerS, ratePerS, during)
  }

  async #run(name: string, mode: 'closed' | 'open', durationMs: number, budgetRate: number, ratePerS?: number, during?: (windowStarted: Promise<void>) => Promise<void>): Promise<LoadFigures> {
    const n = this.#targets.length
    let markStarted: () => void = () => undefined
    const started = new Promise<void>((resolve) => (markStarted = resolve))
    let startedCount = 0
    const usages: (ReturnType<ProcessSampler['endWindow']> | undefined)[] = new Array(n).fill(undefined)
    const side = during?.(started)
    const results = await Promise.all(
      this.#targets.map(({ lg, sampler }, i) => {
        const connections = Math.floor(CONNECTIONS / n)
        const spec: PhaseSpec =
          mode === 'closed'
            ? { name, mode, connections, durationMs, budget: Math.ceil(((budgetRate * BUDGET_PER_CEILING) / n) * (durationMs / 1000)) }
            : { name, mode, connections, durationMs, ratePerS: ratePerS! / n, budget: Math.ceil((ratePerS! / n) * (durationMs / 1000)) + connections }
        return lg.phase(spec, () => {
          sampler.beginWindow()
          setTimeout(() => (usages[i] = sampler.endWindow()), durationMs)
          if (++startedCount === n) markStarted()
        })
      }),
    )
    await side
    return combine(results, usages.map((u) => (u === undefined ? 0 : u.mainCores + u.otherCores)))
  }

  async close(): Promise<void> {
    for (const t of this.#targets) {
      t.sampler.stop()
      await t.lg.close()
    }
  }
}

function combine(results: readonly PhaseResult[], cores: readonly number[]): LoadFigures {
  const counts = new Float64Array(BUCKETS)
  const statuses: Record<string, number> = {}
  for (const r of results) {
    for (let i = 0; i < BUCKETS; i++) counts[i]! += r.latency[i] ?? 0
    for (const [s, c] of Object.entries(r.statuses)) statuses[s] = (statuses[s] ?? 0) + c
  }
  const latency = new LatencyHistogram(counts)
  const perGateway = results.map((r) => (r.statuses['202'] ?? 0) / (r.windowMs / 1000))
  return {
    acceptedPerS: perGateway.reduce((a, b) => a + b, 0),
    perGateway,
    statuses,
    p50Ms: latency.quantileMs(0.5),
    p99Ms: latency.quantileMs(0.99),
    unanswered: results.reduce((a, r) => a + r.unanswered, 0),
    gatewayCores: cores,
  }
}
