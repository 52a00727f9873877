import { context, SpanKind, SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api'

/**
 * The service's spans (docs/operations.md, Tracing). With tracing off, the default,
 * `tracingOn()` is false and callers start no span at all: the hot paths pay one
 * boolean read, not a no-op span object per request. With it on, spans go to the
 * process's tracer provider, set up once by startTracing (tracing-setup.ts).
 */

let on = false
const TRACER_NAME = 'signal-ingest-gateway'

/** Whether spans are recorded in this process (OTEL_EXPORTER_OTLP_ENDPOINT is set). */
export function tracingOn(): boolean {
  return on
}

/** Set by tracing-setup.ts only. */
export function setTracingOn(value: boolean): void {
  on = value
}

export interface SpanStart {
  readonly kind?: SpanKind
  readonly attributes?: Attributes
  /** The span this one is a child of; without it the span starts a trace of its own. */
  readonly parent?: Span
  /** Epoch milliseconds, when the work began before the span could be started. */
  readonly startTimeMs?: number
}

export function startSpan(name: string, start: SpanStart = {}): Span {
  const parentContext = start.parent === undefined ? context.active() : trace.setSpan(context.active(), start.parent)
  return trace.getTracer(TRACER_NAME).startSpan(
    name,
    { kind: start.kind ?? SpanKind.INTERNAL, ...(start.attributes && { attributes: start.attributes }), ...(start.startTimeMs !== undefined && { startTime: start.startTimeMs }) },
    parentContext,
  )
}

/** Ends `span`, marked failed with `errorCode` (a stable code, never a message holding ids or addresses) when given. */
export function endSpan(span: Span, errorCode?: string): void {
  if (errorCode !== undefined) {
    span.setAttribute('error.type', errorCode)
    span.setStatus({ code: SpanStatusCode.ERROR, message: errorCode })
  }
  span.end()
}

/** The W3C Trace Context header naming `span` as the parent of what the receiver does. */
export function traceparentOf(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext()
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`
}

export { SpanKind, type Span }
