import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { Metrics, type ScrapeReadings } from '../../gateway/metrics.js'
import { namingBreaches, parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { repoPath } from '../helpers/repo-root.js'

const zeros: ScrapeReadings = {
  verifySlotsTaken: () => 0,
  liveNonces: () => 0,
  dedupEntries: () => 0,
  journalLastSeq: () => 0,
  inFlightRequests: () => 0,
  provenAddresses: () => 0,
}

t.test('the minute summary counts the client-error refusals since the last one, and leaves shedding to /metrics', async (t) => {
  const m = new Metrics(zeros)
  t.same(m.refusalsSinceLastSummary(), {}, 'nothing yet')
  m.refused('invalid_signature')
  m.refused('invalid_signature')
  m.refused('overloaded')
  m.refused('stale_timestamp')
  t.same(m.refusalsSinceLastSummary(), { invalid_signature: 2, stale_timestamp: 1 })
  m.refused('invalid_signature')
  m.refused('overloaded')
  t.same(m.refusalsSinceLastSummary(), { invalid_signature: 1 }, 'only what came since')
  t.same(m.refusalsSinceLastSummary(), {}, 'a quiet minute has no line')
  const page = parsePrometheusText(await m.exposition())
  t.equal(sampleValue(page, 'sgw_ingest_refused_total', { code: 'invalid_signature' }), 3, 'the counters themselves are not reset')
  t.equal(sampleValue(page, 'sgw_ingest_refused_total', { code: 'overloaded' }), 2)
})

t.test('the page is valid Prometheus text and keeps the naming conventions, default process metrics included', async (t) => {
  const m = new Metrics(zeros)
  m.accepted(1, false)
  m.refused('rate_limited')
  // The event-loop delay histogram has samples only once the loop has turned a few times.
  await new Promise((resolve) => setTimeout(resolve, 50))
  const text = await m.exposition()
  t.equal(m.contentType, 'text/plain; version=0.0.4; charset=utf-8')
  const families = parsePrometheusText(text)
  t.same(namingBreaches(families), [], 'counters end _total, histograms are in seconds, every metric has a HELP')
  for (const [name, type] of [
    ['process_cpu_seconds_total', 'counter'],
    ['process_resident_memory_bytes', 'gauge'],
    ['process_open_fds', 'gauge'],
    ['nodejs_eventloop_lag_seconds', 'gauge'],
    ['nodejs_eventloop_lag_p99_seconds', 'gauge'],
    ['nodejs_heap_size_used_bytes', 'gauge'],
    ['nodejs_external_memory_bytes', 'gauge'],
    ['nodejs_gc_duration_seconds', 'histogram'],
    ['sgw_event_loop_busy_seconds_total', 'counter'],
    ['sgw_ingest_accepted_total', 'counter'],
    ['sgw_ingest_refused_total', 'counter'],
    ['sgw_ingest_accept_latency_seconds', 'histogram'],
    ['sgw_verify_slots_taken', 'gauge'],
    ['sgw_live_nonces', 'gauge'],
    ['sgw_dedup_entries', 'gauge'],
    ['sgw_journal_last_seq', 'gauge'],
    ['sgw_http_requests_in_flight', 'gauge'],
    ['sgw_proven_addresses', 'gauge'],
  ] as const) {
    t.equal(families.get(name)?.type, type, `${name} is a ${type}`)
  }
  t.ok((sampleValue(families, 'process_resident_memory_bytes') as number) > 10_000_000, 'memory is real')
  t.ok((sampleValue(families, 'sgw_event_loop_busy_seconds_total') as number) > 0, 'the loop has run')
  t.notOk(/_ms\b|_ms_/.test(text), 'no metric in milliseconds is left')
})

t.test('accept latency is counted in seconds: each observation in the first bucket whose bound holds it, the sum in seconds', async (t) => {
  const m = new Metrics(zeros)
  m.accepted(0.3, false) // ≤ 0.5 ms
  m.accepted(0.5, false) // a bound is inclusive
  m.accepted(7.5, true) // ≤ 7.5 ms
  m.accepted(12, false) // ≤ 15 ms
  m.accepted(60_000, false) // above every bound: +Inf only
  const page = parsePrometheusText(await m.exposition())
  const bucket = (le: string) => sampleValue(page, 'sgw_ingest_accept_latency_seconds_bucket', { le })
  t.equal(bucket('0.0005'), 2)
  t.equal(bucket('0.005'), 2)
  t.equal(bucket('0.0075'), 3)
  t.equal(bucket('0.01'), 3)
  t.equal(bucket('0.015'), 4)
  t.equal(bucket('5'), 4)
  t.equal(bucket('+Inf'), 5)
  t.equal(sampleValue(page, 'sgw_ingest_accept_latency_seconds_count'), 5)
  t.ok(Math.abs((sampleValue(page, 'sgw_ingest_accept_latency_seconds_sum') as number) - 60.0203) < 1e-9, 'the sum in seconds')
  t.equal(sampleValue(page, 'sgw_ingest_accepted_total', { deduplicated: 'false' }), 4)
  t.equal(sampleValue(page, 'sgw_ingest_accepted_total', { deduplicated: 'true' }), 1)
  const bounds = page.get('sgw_ingest_accept_latency_seconds')?.samples.filter((s) => s.name.endsWith('_bucket')).map((s) => s.labels['le'])
  t.same(bounds, ['0.0005', '0.001', '0.002', '0.003', '0.005', '0.0075', '0.01', '0.015', '0.02', '0.03', '0.05', '0.1', '0.25', '0.5', '1', '5', '+Inf'], 'bounds written as seconds, exactly')
})

t.test('gauges are read when scraped, and two gateways in one process keep their own counts', async (t) => {
  let slots = 3
  const a = new Metrics({ ...zeros, verifySlotsTaken: () => slots })
  const b = new Metrics(zeros)
  a.accepted(1, false)
  a.accepted(1, false)
  b.accepted(1, false)
  const pageA = parsePrometheusText(await a.exposition())
  t.equal(sampleValue(pageA, 'sgw_verify_slots_taken'), 3)
  slots = 7
  const pageA2 = parsePrometheusText(await a.exposition())
  t.equal(sampleValue(pageA2, 'sgw_verify_slots_taken'), 7, 'read again at the next scrape')
  t.equal(sampleValue(pageA2, 'sgw_ingest_accepted_total', { deduplicated: 'false' }), 2, 'a scrape does not add to the counts')
  t.equal(sampleValue(parsePrometheusText(await b.exposition()), 'sgw_ingest_accepted_total', { deduplicated: 'false' }), 1)
})

/**
 * Bytes a call below which a path allocates nothing per call: the smallest object V8 makes
 * (a boxed number) is 12 to 16 bytes, so a per-call allocation shows as 12 or more, while a
 * loaded machine's one-off allocations (compilation, inline caches) spread over 20,000
 * calls measured up to about 2 bytes a call.
 */
const ALLOCATION_NOISE_BYTES = 6

t.test('the per-request metric calls allocate nothing, where prom-client called per request would', async (t) => {
  // A child process: it needs --expose-gc and a young generation large enough that no
  // collection runs while it counts bytes.
  const bench = repoPath('dist/bench/metrics-hot-path.js')
  const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--min-semi-space-size=64', '--max-semi-space-size=64', bench, '--json', '20000'], { timeout: 60_000 })
  const results = JSON.parse(stdout) as Record<string, { nsPerCall: number; bytesPerCall: number }>
  t.ok((results['gateway: accepted + latency'] as { bytesPerCall: number }).bytesPerCall < ALLOCATION_NOISE_BYTES, `accepted(): ${results['gateway: accepted + latency']?.bytesPerCall} bytes a call`)
  t.ok((results['gateway: refused'] as { bytesPerCall: number }).bytesPerCall < ALLOCATION_NOISE_BYTES, `refused(): ${results['gateway: refused']?.bytesPerCall} bytes a call`)
  t.ok((results['prom-client: child inc + observe'] as { bytesPerCall: number }).bytesPerCall > 50, 'the measurement sees allocation where there is some')
})

t.test('the format reader and the naming rules catch what they are there to catch', async (t) => {
  const page = (...lines: string[]) => `${lines.join('\n')}\n`
  const ok = page('# HELP a_total A.', '# TYPE a_total counter', 'a_total{code="x"} 1', '# HELP h_seconds H.', '# TYPE h_seconds histogram', 'h_seconds_bucket{le="0.5"} 1', 'h_seconds_bucket{le="+Inf"} 2', 'h_seconds_sum 0.7', 'h_seconds_count 2')
  t.same(namingBreaches(parsePrometheusText(ok)), [], 'a good page')
  for (const [bad, why] of [
    [page('# TYPE a_total counter', 'a_total{code=x} 1'), 'an unquoted label value'],
    [page('# TYPE a_total counter', 'a_total 1,5'), 'a value that is no number'],
    [page('a_total 1'), 'a sample before its TYPE'],
    [page('# TYPE a_total counter', 'a_total 1', 'a_total 2'), 'the same series twice'],
    [page('# TYPE h_seconds histogram', 'h_seconds_bucket{le="1"} 3', 'h_seconds_bucket{le="+Inf"} 2', 'h_seconds_sum 1', 'h_seconds_count 2'), 'buckets that are not cumulative'],
    [page('# TYPE h_seconds histogram', 'h_seconds_bucket{le="1"} 2', 'h_seconds_sum 1', 'h_seconds_count 2'), 'no +Inf bucket'],
    [page('# TYPE a_total counter', 'a_total 1').slice(0, -1), 'no final newline'],
  ] as const) {
    t.throws(() => parsePrometheusText(bad), why)
  }
  const breaches = namingBreaches(
    parsePrometheusText(page('# HELP sgw_x counter', '# TYPE sgw_x counter', 'sgw_x 1', '# HELP sgw_l_ms l', '# TYPE sgw_l_ms histogram', 'sgw_l_ms_bucket{le="+Inf"} 0', 'sgw_l_ms_sum 0', 'sgw_l_ms_count 0', '# TYPE sgw_y_total gauge', 'sgw_y_total 1')),
  )
  t.same(breaches, ['counter sgw_x does not end _total', 'histogram sgw_l_ms does not end _seconds', 'sgw_l_ms is not in base units', 'gauge sgw_y_total ends _total', 'sgw_y_total has no HELP'])
})
