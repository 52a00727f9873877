import { trace } from '@opentelemetry/api'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace'
import type { Logger } from 'pino'
import type { Config } from '../config/index.js'
import { setTracingOn } from './spans.js'

export interface Tracing {
  /** Sends the spans still queued (bounded by the exporter's timeout), then stops. */
  shutdown(): Promise<void>
}

/** Spans queued for export at most; past it new ones are dropped (bounded memory when the collector is down or slow). */
const MAX_QUEUED_SPANS = 4096
/** How long one export request to the collector may take. */
const EXPORT_TIMEOUT_MS = 10_000

/**
 * Tracing over OTLP/HTTP (JSON) to OTEL_EXPORTER_OTLP_ENDPOINT, or nothing when it is
 * empty. Spans are batched and sent from the event loop in the background; a collector
 * that is down costs dropped spans and a warning, never an ingest answer.
 */
export function startTracing(config: Config, logger: Logger): Tracing | undefined {
  if (config.OTEL_EXPORTER_OTLP_ENDPOINT === '') return undefined
  const url = `${config.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces`
  const exporter = new OTLPTraceExporter({ url, timeoutMillis: EXPORT_TIMEOUT_MS })
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': config.OTEL_SERVICE_NAME, 'service.instance.role': config.ROLE }),
    sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.TRACE_SAMPLE_PERCENT / 100) }),
    spanProcessors: [new BatchSpanProcessor({ exporter, maxQueueSize: MAX_QUEUED_SPANS, scheduledDelayMillis: 1000, exportTimeoutMillis: EXPORT_TIMEOUT_MS })],
  })
  trace.setGlobalTracerProvider(provider)
  setTracingOn(true)
  logger.info({ endpoint: url, sample_percent: config.TRACE_SAMPLE_PERCENT }, 'tracing: spans are exported over OTLP/HTTP')
  return {
    async shutdown() {
      setTracingOn(false)
      await provider.shutdown().catch((err: unknown) => logger.warn({ err }, 'tracing: the last spans were not exported'))
      trace.disable()
    },
  }
}
