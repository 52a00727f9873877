/**
 * The cost of tracing on the ingest path, per request: the `ingest` span and its
 * `signal_log.append` child as the gateway makes them, with tracing off (the default:
 * one boolean read, no span) and on (the real provider, batch processor and OTLP
 * exporter, towards a port where nothing listens, so spans are dropped after export
 * fails, as with a collector that is down), at 100 % and 1 % sampling.
 *
 *   node dist/bench/tracing-hot-path.js [requests]
 *
 * CPU time is the process's (the exporter's work included), divided by the requests.
 */
import { argv } from 'node:process'
import { performance } from 'node:perf_hooks'
import pino from 'pino'
import { loadConfig } from '../config/index.js'
import { endIngestSpan, startIngestSpan } from '../gateway/ingest-spans.js'
import { endSpan, startSpan, tracingOn } from '../tracing/index.js'
import { startTracing } from '../tracing/tracing-setup.js'

/** What the ingest edge and the pipeline do per request, for `n` requests; ns of wall and CPU time per request. */
function perRequest(n: number): { wallNs: number; cpuNs: number } {
  const run = () => {
    for (let i = 0; i < n; i++) {
      const span = tracingOn() ? startIngestSpan(Date.now(), 'src_bench') : undefined
      const append = span === undefined ? undefined : startSpan('signal_log.append', { parent: span })
      if (append !== undefined) {
        append.setAttributes({ 'sgw.log.seq': i, 'sgw.log.duplicate': false })
        endSpan(append)
      }
      if (span !== undefined) endIngestSpan(span, 202, false)
    }
  }
  run() // warm-up
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  run()
  const wallNs = ((performance.now() - t0) * 1e6) / n
  const cpu = process.cpuUsage(cpu0)
  return { wallNs, cpuNs: ((cpu.user + cpu.system) * 1e3) / n }
}

const n = Number(argv[2] ?? 200_000)
const quiet = pino({ level: 'silent' })
const show = (label: string, r: { wallNs: number; cpuNs: number }) => console.log(`${label.padEnd(20)} ${r.wallNs.toFixed(1).padStart(9)} ns wall  ${r.cpuNs.toFixed(1).padStart(9)} ns CPU per request`)

show('tracing off', perRequest(n * 50))
for (const percent of [100, 1]) {
  const tracing = startTracing(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9', TRACE_SAMPLE_PERCENT: String(percent) }), quiet)
  show(`tracing on, ${percent} %`, perRequest(n))
  await tracing?.shutdown()
}
