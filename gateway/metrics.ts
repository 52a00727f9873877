import { performance } from 'node:perf_hooks'
import { collectDefaultMetrics, Counter, Registry } from 'prom-client'
import { ERROR_STATUS, type ErrorCode } from '../schemas/index.js'
import { MillisecondsHistogram } from './metrics-histogram.js'
import { scrapedMetrics } from './scraped-metrics.js'

/** Upper bounds of the accept-latency buckets, in milliseconds (shown in seconds). */
const ACCEPT_LATENCY_BOUNDS_MS = [0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 100, 250, 500, 1000, 5000] as const

/** What the gateway reads at scrape time, never per request. */
export interface ScrapeReadings {
  readonly verifySlotsTaken: () => number
  readonly liveNonces: () => number
  readonly dedupEntries: () => number
  readonly journalLastSeq: () => number
  readonly inFlightRequests: () => number
  readonly provenAddresses: () => number
}

/**
 * The gateway's metrics for `GET /metrics` (admin or metrics token), in the Prometheus
 * text format through prom-client: its own registry (never prom-client's global one,
 * so two gateways or tests in one process do not collide), with prom-client's default
 * process and Node.js metrics. Aggregates only: no source, key or signal ids, so the
 * page leaks no tenant.
 *
 * The per-request calls (`accepted`, `refused`) only add to numbers held here: no
 * allocation, a few nanoseconds. prom-client's counters copy them in when scraped
 * (their `collect`), so its per-call costs (a labels hash string per `inc`) stay off
 * the ingest path.
 */
export class Metrics {
  readonly registry = new Registry()
  #accepted = 0
  #deduplicated = 0
  readonly #refused = new Map<ErrorCode, number>()
  /** `#refused` as the last summary line saw it. */
  readonly #summarised = new Map<ErrorCode, number>()
  readonly #acceptLatency = new MillisecondsHistogram(
    'sgw_ingest_accept_latency_seconds',
    'Arrival of the request head to the 202 answer, inside the gateway.',
    ACCEPT_LATENCY_BOUNDS_MS,
  )

  constructor(readings: ScrapeReadings) {
    const registers = [this.registry]
    collectDefaultMetrics({ register: this.registry })
    const counts = () => ({ accepted: this.#accepted, deduplicated: this.#deduplicated, refused: this.#refused })

    new Counter({
      name: 'sgw_ingest_accepted_total',
      help: 'Signals answered 202: first accepts (deduplicated="false") and retries of an accepted signal (deduplicated="true").',
      labelNames: ['deduplicated'],
      registers,
      collect(this: Counter<'deduplicated'>) {
        const now = counts()
        this.reset()
        this.inc({ deduplicated: 'false' }, now.accepted)
        this.inc({ deduplicated: 'true' }, now.deduplicated)
      },
    })
    new Counter({
      name: 'sgw_ingest_refused_total',
      help: 'Ingest requests refused, by error code (shedding included); a code appears with its first refusal.',
      labelNames: ['code'],
      registers,
      collect(this: Counter<'code'>) {
        this.reset()
        for (const [code, n] of counts().refused) this.inc({ code }, n)
      },
    })
    this.registry.registerMetric(this.#acceptLatency.asMetric())
    new Counter({
      name: 'sgw_event_loop_busy_seconds_total',
      help: 'Time the event loop spent running code rather than waiting for I/O; its rate is the event loop utilization (0 to 1).',
      registers,
      collect(this: Counter) {
        this.reset()
        this.inc(performance.eventLoopUtilization().active / 1000)
      },
    })

    const { gauge } = scrapedMetrics(this.registry)
    gauge('sgw_verify_slots_taken', 'Signature verifications queued or running in the verify pool.', readings.verifySlotsTaken)
    gauge('sgw_live_nonces', 'Nonces held for replay checks (each for 10 minutes after its request).', readings.liveNonces)
    gauge('sgw_dedup_entries', 'Accepted signal ids held for duplicate detection.', readings.dedupEntries)
    gauge('sgw_journal_last_seq', 'Sequence number of the last signal appended to the signal log.', readings.journalLastSeq)
    gauge('sgw_http_requests_in_flight', 'Ingest and control-plane requests received and not yet answered.', readings.inFlightRequests)
    gauge(
      'sgw_proven_addresses',
      'Client addresses proven for a key by a fresh, validly signed request (their own lane of the verification slots).',
      readings.provenAddresses,
    )
  }

  /** A 202, with the time from the request's arrival to the answer. */
  accepted(latencyMs: number, deduplicated: boolean): void {
    if (deduplicated) this.#deduplicated++
    else this.#accepted++
    this.#acceptLatency.observeMs(latencyMs)
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

  /** `text/plain; version=0.0.4; charset=utf-8`. */
  get contentType(): string {
    return this.registry.contentType
  }

  /** The page a scrape gets, every metric read now. */
  exposition(): Promise<string> {
    return this.registry.metrics()
  }
}
