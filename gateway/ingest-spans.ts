import { endSpan, SpanKind, startSpan, type Span } from '../tracing/index.js'

/**
 * The `ingest` span of a signed push whose body was read: from the request's arrival to
 * its answer. Requests refused before their body (framing, shedding, a bad header) get
 * no span; the refusal counters of /metrics count them.
 */
export function startIngestSpan(receivedAtMs: number, sourceId: string): Span {
  return startSpan('ingest', {
    kind: SpanKind.SERVER,
    startTimeMs: receivedAtMs,
    attributes: { 'http.request.method': 'POST', 'http.route': '/v1/byo/sources/:source_id/signals', 'sgw.source_id': sourceId },
  })
}

/** Ends it with the answer's status; `errorCode` is the refusal's stable code. */
export function endIngestSpan(span: Span, status: number, deduplicated: boolean, errorCode?: string): void {
  span.setAttribute('http.response.status_code', status)
  if (status === 202) span.setAttribute('sgw.deduplicated', deduplicated)
  endSpan(span, errorCode)
}
