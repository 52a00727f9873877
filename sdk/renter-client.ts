import { ApiCaller } from './api-call.js'
import type { Page } from './creator-api.js'
import { RenterApiError } from './errors.js'
import { pollRentalEvents, type PollOptions } from './rental-poller.js'
import { rentalEvents, type RentalStreamOptions } from './rental-event-stream.js'
import type { RentalEvent, RentalView, StreamTicket } from './renter-api.js'

export interface RenterClientOptions {
  /** The gateway's base URL, with its path prefix if it has one. */
  readonly gatewayUrl: string
  /** The renter token (role renter), from the gateway's operator. Keep it on a server: never in a page others load. */
  readonly token: string
  readonly fetch?: typeof fetch
}

export type StreamOptions = Omit<RentalStreamOptions, 'gatewayUrl' | 'rentalId' | 'ticket' | 'fetch'>

/**
 * The calls a renter makes with its own token: its rentals, their events (a resumed event
 * stream, or polling) and their webhook (set, read, delivery log, re-sends, retry).
 * Calls are sent once; the event stream and the poller retry what a retry can change.
 */
export class RenterClient {
  readonly #api: ApiCaller
  readonly #options: RenterClientOptions

  constructor(options: RenterClientOptions) {
    this.#options = options
    this.#api = new ApiCaller(options, (step, status, body) => new RenterApiError(step, status, body))
  }

  listRentals(filter: { state?: string; sourceId?: string; limit?: number; cursor?: string } = {}): Promise<Page<RentalView>> {
    return this.#api.page('list rentals', '/v1/rentals', filter, { state: filter.state, source_id: filter.sourceId })
  }

  getRental(rentalId: string): Promise<RentalView> {
    return this.#api.call('get rental', 'GET', `/v1/rentals/${enc(rentalId)}`)
  }

  /** A single-use ticket that opens one event stream of the rental within its lifetime (60 s by default). */
  streamTicket(rentalId: string): Promise<StreamTicket> {
    return this.#api.call('stream ticket', 'POST', `/v1/rentals/${enc(rentalId)}/stream-tickets`)
  }

  /** The rental's events as a stream, each connection through a new ticket, resumed after every break (`rentalEvents`). */
  events(rentalId: string, options: StreamOptions = {}): AsyncGenerator<RentalEvent, void, undefined> {
    return rentalEvents({
      ...options,
      gatewayUrl: this.#options.gatewayUrl,
      rentalId,
      ticket: async () => (await this.streamTicket(rentalId)).ticket,
      ...(this.#options.fetch === undefined ? {} : { fetch: this.#options.fetch }),
    })
  }

  /** The rental's events by polling (`pollRentalEvents`). */
  poll(rentalId: string, options: PollOptions = {}): AsyncGenerator<RentalEvent, void, undefined> {
    return pollRentalEvents(this.#api, rentalId, options)
  }

  getWebhook(rentalId: string): Promise<Record<string, unknown>> {
    return this.#api.call('get webhook', 'GET', `/v1/rentals/${enc(rentalId)}/webhook`)
  }

  /** Sets or replaces the URL; `scheme` where the gateway takes one (`v1a`, Ed25519, or `v1`, HMAC with a `whsec_` secret). */
  setWebhook(rentalId: string, url: string, options: { scheme?: 'v1a' | 'v1' } = {}): Promise<Record<string, unknown>> {
    return this.#api.call('set webhook', 'PUT', `/v1/rentals/${enc(rentalId)}/webhook`, { url, ...(options.scheme === undefined ? {} : { scheme: options.scheme }) })
  }

  deleteWebhook(rentalId: string): Promise<Record<string, unknown>> {
    return this.#api.call('delete webhook', 'DELETE', `/v1/rentals/${enc(rentalId)}/webhook`)
  }

  /** The last attempts and dead letters, newest first. */
  webhookDeliveries(rentalId: string): Promise<{ attempts: Record<string, unknown>[]; dead_letters: Record<string, unknown>[] }> {
    return this.#api.call('webhook deliveries', 'GET', `/v1/rentals/${enc(rentalId)}/webhook/deliveries`)
  }

  /** Queues one event again (a dead letter, or one lost on the receiver's side). */
  resendEvent(rentalId: string, eventId: string): Promise<{ event_id: string; queued: number }> {
    return this.#api.call('resend event', 'POST', `/v1/rentals/${enc(rentalId)}/webhook/deliveries/${enc(eventId)}/resend`)
  }

  /** Queues again every event of the rental accepted at or after `since` (ISO 8601 UTC). */
  resendSince(rentalId: string, since: string): Promise<{ queued: number }> {
    return this.#api.call('resend events', 'POST', `/v1/rentals/${enc(rentalId)}/webhook/resend`, { since })
  }

  /** Tries the event the webhook waits on now, rather than at the end of its backoff. */
  retryWebhook(rentalId: string): Promise<Record<string, unknown>> {
    return this.#api.call('retry webhook', 'POST', `/v1/rentals/${enc(rentalId)}/webhook/retry`)
  }

  /** Sends a signed `byo.webhook.test` event now and answers what the endpoint did. */
  testWebhook(rentalId: string): Promise<Record<string, unknown>> {
    return this.#api.call('test webhook', 'POST', `/v1/rentals/${enc(rentalId)}/webhook/test`)
  }
}

const enc = encodeURIComponent
