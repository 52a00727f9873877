// The span helpers only: tracing-setup.ts (the SDK and the OTLP exporter) is imported by
// the service alone, and only when tracing is on, so a process without it loads none of it.
export { endSpan, SpanKind, startSpan, traceparentOf, tracingOn, type Span, type SpanStart } from './spans.js'
