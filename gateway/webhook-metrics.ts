import { Counter, Gauge, type Registry } from 'prom-client'
import type { Webhooks } from '../delivery/index.js'

/** Webhook delivery metrics, read from the workers' running counts when scraped. */
export function registerWebhookMetrics(registry: Registry, webhooks: Webhooks): void {
  new Counter({
    name: 'sgw_webhook_attempts_total',
    help: 'Webhook delivery attempts by result: delivered, http_status, redirect, gone, timeout, refused_address, connection.',
    labelNames: ['result'],
    registers: [registry],
    collect(this: Counter<'result'>) {
      this.reset()
      for (const [result, count] of webhooks.counts().attempts) this.inc({ result }, count)
    },
  })
  new Counter({
    name: 'sgw_webhook_dead_letters_total',
    help: 'Webhook events dead-lettered after failing for the whole retry window.',
    registers: [registry],
    collect(this: Counter) {
      this.reset()
      this.inc(webhooks.counts().deadLetters)
    },
  })
  new Gauge({
    name: 'sgw_webhook_endpoints',
    help: 'Webhook endpoints by health: healthy, failing (no success since a failure) or disabled. Every delivery process follows every endpoint, so each reports the same figures.',
    labelNames: ['state'],
    registers: [registry],
    collect(this: Gauge<'state'>) {
      for (const [state, count] of Object.entries(webhooks.health().endpoints)) this.set({ state }, count)
    },
  })
  new Counter({
    name: 'sgw_webhook_state_changes_total',
    help: 'Webhook endpoints that became failing, disabled or healthy again, counted by the process running their deliveries.',
    labelNames: ['to'],
    registers: [registry],
    collect(this: Counter<'to'>) {
      this.reset()
      for (const [to, count] of webhooks.health().changes) this.inc({ to }, count)
    },
  })
}
