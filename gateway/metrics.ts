import { ERROR_STATUS, type ErrorCode } from '../schemas/index.js'

/**
 * Process metrics in the Prometheus text format (`GET /metrics`, admin token).
 * Aggregates only: no source, key or signal ids, so the page leaks no tenant.
 */
const LATENCY_BUCKETS_MS = [0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 100, 250, 500, 1000, 5000] as const

export interface Gauges {
  readonly verifySlotsTaken: number
  readonly liveNonces: number
  readonly dedupEntries: number
  readonly journalLastSeq: number
  readonly inFlightRequests: number
  readonly provenAddresses: number
}

export class Metrics {
  #accepted = 0
  #deduplicated = 0
  readonly #refused = new Map<ErrorCode, number>()
  /** `#refused` as the last summary line saw it. */
  readonly #summarised = new Map<ErrorCode, number>()
  readonly #buckets = new Float64Array(LATENCY_BUCKETS_MS.length)
  #latencyCount = 0
  #latencySumMs = 0

  /** A 202, with the time from the request's arrival to the answer. */
  accepted(latencyMs: number, deduplicated: boolean): void {
    if (deduplicated) this.#deduplicated++
    else this.#accepted++
    this.#latencyCount++
    this.#latencySumMs += latencyMs
    for (let i = 0; i < LATENCY_BUCKETS_MS.length; i++) {
      if (latencyMs <= (LATENCY_BUCKETS_MS[i] as number)) {
        this.#buckets[i] = (this.#buckets[i] as number) + 1
        break
      }
    }
  }

  refused(code: ErrorCode): void {
    this.#refused.set(code, (this.#refused.get(code) ?? 0) + 1)
  }

  /**
   * The client-error refusals (4xx) counted since the previous call, by code: the
   * once-a-minute summary line. Shedding and other 5xx answers stay in /metrics only.
   */
  refusalsSinceLastSummary(): Partial<Record<ErrorCode, number>> {
    const since: Partial<Record<ErrorCode, number>> = {}
    for (const [code, n] of this.#refused) {
      const before = this.#summarised.get(code) ?? 0
      if (n > before && ERROR_STATUS[code] < 500) since[code] = n - before
      this.#summarised.set(code, n)
    }
    return since
  }

  render(g: Gauges): string {
    const lines: string[] = [
      '# HELP sgw_ingest_accepted_total Signals answered 202, first accepts and deduplicated retries.',
      '# TYPE sgw_ingest_accepted_total counter',
      `sgw_ingest_accepted_total{deduplicated="false"} ${this.#accepted}`,
      `sgw_ingest_accepted_total{deduplicated="true"} ${this.#deduplicated}`,
      '# HELP sgw_ingest_refused_total Ingest requests refused, by error code (shedding included).',
      '# TYPE sgw_ingest_refused_total counter',
      ...[...this.#refused].map(([code, n]) => `sgw_ingest_refused_total{code="${code}"} ${n}`),
      '# HELP sgw_ingest_accept_latency_ms Arrival of the request head to the 202, in the gateway.',
      '# TYPE sgw_ingest_accept_latency_ms histogram',
    ]
    let cumulative = 0
    LATENCY_BUCKETS_MS.forEach((le, i) => {
      cumulative += this.#buckets[i] as number
      lines.push(`sgw_ingest_accept_latency_ms_bucket{le="${le}"} ${cumulative}`)
    })
    lines.push(
      `sgw_ingest_accept_latency_ms_bucket{le="+Inf"} ${this.#latencyCount}`,
      `sgw_ingest_accept_latency_ms_sum ${this.#latencySumMs}`,
      `sgw_ingest_accept_latency_ms_count ${this.#latencyCount}`,
      '# TYPE sgw_verify_slots_taken gauge',
      `sgw_verify_slots_taken ${g.verifySlotsTaken}`,
      '# TYPE sgw_live_nonces gauge',
      `sgw_live_nonces ${g.liveNonces}`,
      '# TYPE sgw_dedup_entries gauge',
      `sgw_dedup_entries ${g.dedupEntries}`,
      '# TYPE sgw_journal_last_seq gauge',
      `sgw_journal_last_seq ${g.journalLastSeq}`,
      '# TYPE sgw_http_requests_in_flight gauge',
      `sgw_http_requests_in_flight ${g.inFlightRequests}`,
      '# HELP sgw_proven_addresses Client addresses proven for a key by a fresh, validly signed request (their own lane of the verification slots).',
      '# TYPE sgw_proven_addresses gauge',
      `sgw_proven_addresses ${g.provenAddresses}`,
      '# HELP sgw_process_memory_bytes Resident set, JavaScript heap, and memory outside it (typed arrays, buffers).',
      '# TYPE sgw_process_memory_bytes gauge',
      ...Object.entries(process.memoryUsage()).map(([kind, bytes]) => `sgw_process_memory_bytes{kind="${kind}"} ${bytes}`),
    )
    return `${lines.join('\n')}\n`
  }
}
