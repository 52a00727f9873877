/** Delivery's public entry. SSE, polling and webhook workers arrive with the delivery release. */
export { signalAcceptedEvent } from './signal-event.js'
export { eventIdOf, Webhooks, WebhookRequestError, WebhookUrlError, webhookBucketLimits, WEBHOOK_TIMEOUT_MS, type WebhookEndpoint, type WebhooksOptions } from './webhooks/index.js'
