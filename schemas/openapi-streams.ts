import { RentalEndedEvent, SignalDisputedEvent, StreamGapEvent } from './events.js'
import { bearer, control, json, noInput, nullable, ok, path, time, withBody } from './openapi-parts.js'

/**
 * The rental's event stream (server-sent events), its tickets and polling: a renter token,
 * the rental's renter (every other role 403, another renter the 404 of a missing rental).
 * The limits are the ones gateway/streams checks (a poll page 1 to 1,000 events, default
 * 100; a ticket of 43 base64url characters, single use).
 */

const rental = path('rental_id')
const query = (name: string, description: string, schema: Record<string, unknown>) => ({ name, in: 'query', required: false, description, schema })
const renterOnly = 'a renter token, the rental\u2019s renter; another renter gets 404 as for a missing rental, any other role 403'
const eventId = { type: 'string', maxLength: 32, description: 'an event_id this API sent (opaque)' }

export function streamPaths(): Record<string, unknown> {
  return {
    '/v1/rentals/{rental_id}/stream-tickets': {
      post: {
        security: bearer,
        description: `${renterOnly}. A ticket for one event stream of this rental, for browsers' EventSource (which cannot send an Authorization header): single use, valid STREAM_TICKET_TTL_MS (60 s by default); 429 rate_limited with Retry-After past STREAM_TICKETS_MAX_PER_RENTAL (20) outstanding tickets of the rental or STREAM_TICKETS_MAX_PER_RENTER (200) of the renter; 503 overloaded when too many are outstanding in all`,
        parameters: [rental],
        requestBody: noInput,
        responses: {
          '201': { description: 'the ticket', ...ok({ type: 'object', properties: { ticket: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' }, rental_id: { type: 'string' }, expires_at: time } }) },
          ...withBody(404),
        },
      },
    },
    '/v1/rentals/{rental_id}/events': {
      get: {
        security: [{ bearer: [] }, { ticket: [] }],
        description:
          `${renterOnly}; or ?ticket= from POST stream-tickets instead of the header (not both: 400). Server-sent events: retry: first, then each event as id:, event: and data: (its JSON), a ": ping" comment when idle. ` +
          'Replays from the resume point (Last-Event-ID over ?last_event_id=; none: the rental\u2019s start), then live; closes after byo.rental.ended. byo.signal.disputed comes at its place (after the log record that was last when the dispute was accepted), replayed on resume like every event. ' +
          '429 rate_limited with Retry-After past STREAM_MAX_PER_RENTAL streams of the rental (over every process of a cluster); 503 overloaded with Retry-After while they cannot be counted; 401 for a ticket unknown, used or expired',
        parameters: [
          rental,
          { name: 'Last-Event-ID', in: 'header', required: false, description: 'resume after this event (what EventSource sends on reconnecting)', schema: eventId },
          query('last_event_id', 'resume after this event; the Last-Event-ID header wins', eventId),
          query('ticket', 'a stream ticket, instead of the Authorization header', { type: 'string' }),
        ],
        responses: {
          '200': {
            description: 'text/event-stream; each data: line is one event, as the schemas say',
            content: { 'text/event-stream': { schema: { type: 'string', description: 'events of the shapes DeliveryEvent lists' } } },
          },
          '204': { description: 'resumed from byo.rental.ended: nothing follows (EventSource stops reconnecting)' },
          ...control(400, 404, 429),
        },
      },
    },
    '/v1/rentals/{rental_id}/signals': {
      get: {
        security: bearer,
        description: `${renterOnly}. Polling: the stream's events (byo.signal.disputed included), in the stream's order, a page at a time; pass next_cursor as the next after; null when nothing follows yet and after byo.rental.ended`,
        parameters: [
          rental,
          query('after', 'exclusive: the last event_id you have; absent, from the rental\u2019s start', eventId),
          query('limit', 'events at most (a page may hold fewer while more follow)', { type: 'integer', minimum: 1, maximum: 1000, default: 100 }),
        ],
        responses: {
          '200': {
            description: 'events and next_cursor',
            ...json({ type: 'object', properties: { ok: { const: true }, data: { type: 'array', items: { $ref: '#/components/schemas/DeliveryEvent' } }, next_cursor: nullable('string') } }),
          },
          ...control(400, 404),
        },
      },
    },
  }
}

/** The event shapes the stream and polling carry. */
export const streamSchemas = {
  SignalDisputedEvent,
  RentalEndedEvent,
  StreamGapEvent,
  DeliveryEvent: { oneOf: ['SignalAcceptedEvent', 'SignalDisputedEvent', 'RentalEndedEvent', 'StreamGapEvent'].map((name) => ({ $ref: `#/components/schemas/${name}` })) },
}
/** `?ticket=` of the event stream: what a browser's EventSource uses instead of the Authorization header. */
export const ticketScheme = { type: 'apiKey', in: 'query', name: 'ticket' }
