/** Webhooks' public entry: the service object the gateway's routes and the service use. */
export { Webhooks, webhookBucketLimits, WebhookRequestError, WEBHOOK_TIMEOUT_MS, type WebhookHealth, type WebhookNotice, type WebhooksOptions } from './webhooks.js'
export { WebhookSecrets, hmacSignature } from './webhook-secrets.js'
export { WebhookUrlError } from './webhook-url.js'
export { type WebhookEndpoint, type WebhookScheme, WEBHOOK_SCHEMES } from './webhook-state.js'
export { eventIdOf } from './webhook-event.js'
export { DeliveryKeyLimitError, DeliveryKeys, type PublishedDeliveryKey } from './delivery-keys.js'
