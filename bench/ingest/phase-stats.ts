import { LatencyHistogram } from './histogram.js'
import type { ParsedResponse } from './http-client.js'
import type { PhaseResult, PhaseSpec } from './protocol.js'

/** Server bugs show up as unexpected statuses; a few full responses are kept to report them. */
const UNEXPECTED_SAMPLES = 5

/** Counters of one phase; only responses inside the measuring window count. */
export class PhaseStats {
  readonly statuses: Record<string, number> = {}
  readonly latency = new LatencyHistogram()
  readonly acceptedLatency = new LatencyHistogram()
  readonly unexpected: string[] = []
  inWindow = false
  sent = 0
  shedWithoutRetryAfter = 0
  recycled = 0
  dropped = 0
  connectErrors = 0
  unanswered = 0
  exhausted = false

  /** Records one response; returns true when the request was shed unverified and may be sent again. */
  record(res: ParsedResponse, startedAtMs: number, nowMs: number): boolean {
    const shed = res.status === 503 && res.text !== undefined && res.text.includes('"overloaded"')
    if (!this.inWindow) return shed
    const key = String(res.status)
    this.statuses[key] = (this.statuses[key] ?? 0) + 1
    this.latency.recordMs(nowMs - startedAtMs)
    if (res.status === 202) this.acceptedLatency.recordMs(nowMs - startedAtMs)
    else if (res.status === 503 && !res.retryAfter) this.shedWithoutRetryAfter++
    if (!shed && res.status !== 202 && this.unexpected.length < UNEXPECTED_SAMPLES) this.unexpected.push(res.text ?? `status ${res.status}`)
    return shed
  }

  result(spec: PhaseSpec, windowMs: number, signed: number, signMs: number, loadgenCpuMs: number): PhaseResult {
    return {
      name: spec.name,
      mode: spec.mode,
      connections: spec.connections,
      windowMs,
      signed,
      signMs,
      sent: this.sent,
      statuses: this.statuses,
      shedWithoutRetryAfter: this.shedWithoutRetryAfter,
      recycled: this.recycled,
      dropped: this.dropped,
      connectErrors: this.connectErrors,
      unanswered: this.unanswered,
      exhausted: this.exhausted,
      latency: this.latency.toArray(),
      acceptedLatency: this.acceptedLatency.toArray(),
      unexpected: this.unexpected,
      loadgenCpuMs,
    }
  }
}
