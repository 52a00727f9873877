import { LatencyHistogram } from './histogram.js'
import type { WindowUsage } from './process-sampler.js'
import type { PhaseResult } from './protocol.js'

/** Formatting of phase results; every figure the summary uses is computed here once. */

export interface PhaseFigures {
  readonly result: PhaseResult
  readonly usage: WindowUsage
  readonly acceptedPerS: number
  readonly shed: number
  readonly p50: number
  readonly p99: number
  readonly p999: number
  readonly max: number
}

const int = (n: number) => Math.round(n).toLocaleString('en-US')
const ms = (n: number) => (Number.isNaN(n) ? '-' : n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0))

export function figures(result: PhaseResult, usage: WindowUsage): PhaseFigures {
  const latency = new LatencyHistogram(result.latency)
  const seconds = result.windowMs / 1000
  return {
    result,
    usage,
    acceptedPerS: (result.statuses['202'] ?? 0) / seconds,
    shed: result.statuses['503'] ?? 0,
    p50: latency.quantileMs(0.5),
    p99: latency.quantileMs(0.99),
    p999: latency.quantileMs(0.999),
    max: latency.quantileMs(1),
  }
}

/** The latency floor's phase: only what the comparison needs. */
export interface FloorFigures {
  readonly result: PhaseResult
  readonly p50: number
  readonly p99: number
}

export function floorLines(f: FloorFigures): string[] {
  const r = f.result
  const latency = new LatencyHistogram(r.latency)
  return [
    `${r.name}: a bare uWS server in its own process (floor-server.ts), ${r.connections} connections, open loop paced at ${int(r.sent / (r.windowMs / 1000))}/s, ${(r.windowMs / 1000).toFixed(2)} s window`,
    `  latency ms (from scheduled send time): p50 ${ms(f.p50)}, p99 ${ms(f.p99)}, p99.9 ${ms(latency.quantileMs(0.999))}, max ${ms(latency.quantileMs(1))}; unanswered ${int(r.unanswered)}`,
  ]
}

export function phaseLines(f: PhaseFigures): string[] {
  const r = f.result
  const seconds = r.windowMs / 1000
  const others = Object.entries(r.statuses).filter(([s]) => s !== '202' && s !== '503')
  const pace = r.mode === 'open' ? ` paced at ${int(r.sent / seconds)}/s scheduled` : ''
  const lines = [
    `${r.name}: ${r.connections} connections, ${r.mode} loop${pace}, ${seconds.toFixed(2)} s window` +
      ` (pre-signed ${int(r.signed)} in ${(r.signMs / 1000).toFixed(1)} s${r.exhausted ? ', RAN OUT: window ended early' : ''})`,
    `  sent ${int(r.sent)}; 202 ${int(r.statuses['202'] ?? 0)} = ${int(f.acceptedPerS)}/s; 503 ${int(f.shed)} = ${int(f.shed / seconds)}/s` +
      ` (without Retry-After: ${int(r.shedWithoutRetryAfter)}, re-sent ${int(r.recycled)});` +
      ` other ${others.length === 0 ? '0' : others.map(([s, n]) => `${s}×${int(n)}`).join(', ')};` +
      ` dropped ${int(r.dropped)}; connect errors ${int(r.connectErrors)}${r.mode === 'open' ? `; unanswered ${int(r.unanswered)}` : ''}`,
    `  latency ms (${r.mode === 'open' ? 'from scheduled send time' : 'from write'}, all statuses): p50 ${ms(f.p50)}, p99 ${ms(f.p99)}, p99.9 ${ms(f.p999)}, max ${ms(f.max)}` +
      (f.shed > 0 ? `; 202 only: p50 ${ms(new LatencyHistogram(r.acceptedLatency).quantileMs(0.5))}, p99 ${ms(new LatencyHistogram(r.acceptedLatency).quantileMs(0.99))}` : ''),
    `  gateway: CPU main thread ${f.usage.mainCores.toFixed(2)} + other threads ${f.usage.otherCores.toFixed(2)} cores, VmRSS max ${f.usage.maxRssMb.toFixed(0)} MB (VmHWM ${f.usage.hwmMb.toFixed(0)} MB);` +
      ` load generator CPU ${(r.loadgenCpuMs / r.windowMs).toFixed(2)} cores`,
  ]
  for (const sample of r.unexpected) lines.push(`  UNEXPECTED RESPONSE: ${sample.replace(/\r\n/g, ' | ')}`)
  return lines
}

export function formatRate(n: number): string {
  return int(n)
}

export function formatMs(n: number): string {
  return ms(n)
}

export function targetLine(name: string, met: boolean, detail: string): string {
  return `  ${met ? 'MET ' : 'MISS'} ${name}: ${detail}`
}
