/** Webhooks' public entry: the service object the gateway's routes and the service use. */
export { Webhooks, webhookBucketLimits, WebhookRequestError, WEBHOOK_TIMEOUT_MS, type WebhooksOptions } from './webhooks.js'
export { WebhookUrlError } from './webhook-url.js'
export { type WebhookEndpoint } from './webhook-state.js'
export { eventIdOf } from './webhook-event.js'
export { DeliveryKeyLimitError, DeliveryKeys, type PublishedDeliveryKey } from './delivery-keys.js'
