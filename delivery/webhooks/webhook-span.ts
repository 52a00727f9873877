import { endSpan, SpanKind, startSpan, type Span } from '../../tracing/index.js'
import type { AttemptOutcome } from './webhook-worker.js'

/** A `webhook.deliver` span: one attempt, a trace of its own (the log's records do not carry their requests' trace context). */
export function startWebhookSpan(webhookId: string): Span {
  return startSpan('webhook.deliver', { kind: SpanKind.CLIENT, attributes: { 'http.request.method': 'POST', 'sgw.webhook_id': webhookId } })
}

/** Ends it with the attempt's result (delivered, http_status, timeout...) and the receiver's status, if any. */
export function endWebhookSpan(span: Span, outcome: AttemptOutcome): void {
  span.setAttribute('sgw.webhook.result', outcome.result)
  if (outcome.status !== null) span.setAttribute('http.response.status_code', outcome.status)
  endSpan(span, outcome.result === 'delivered' ? undefined : outcome.result)
}
