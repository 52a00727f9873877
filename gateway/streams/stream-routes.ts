import { createHash, randomBytes } from 'node:crypto'
import { parseEventId, TicketStoreFullError, type EventPosition, type StreamHub, type StreamSession, type TicketStore } from '../../delivery/index.js'
import type { Principal } from '../../registry/index.js'
import type { RentalRecord, Rentals } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'
import { bearerPrincipal } from '../http/bearer.js'
import { getRoute, jsonRoute, pathParameter, type JsonRoutesParts } from '../http/json-route.js'
import { noBody } from '../control/access.js'
import { FlushScheduler } from './sse-flush.js'
import { SseSink } from './sse-sink.js'

export interface StreamRouteOptions {
  readonly hub: StreamHub
  readonly rentals: Rentals
  readonly tickets: TicketStore
  readonly ticketTtlMs: number
  readonly heartbeatMs: number
  readonly retryMs: number
  readonly bufferBytes: number
  readonly now?: () => number
}

/** A ticket as issued: 32 random bytes, base64url (43 characters). */
const TICKET = /^[A-Za-z0-9_-]{43}$/
/** Seconds a client refused for the per-rental cap waits before trying again. */
const CAP_RETRY_AFTER_S = 5

const hashTicket = (ticket: string) => createHash('sha256').update(ticket).digest('hex')

/** Only the rental's renter; anyone else gets the 404 of a rental that does not exist. */
function ownRental(rentals: Rentals, principal: Principal, rentalId: string): RentalRecord {
  if (principal.role !== 'renter') throw new ApiError('forbidden', 'rental event streams are for the rental\'s renter')
  const rental = rentals.get(rentalId)
  if (rental === undefined || rental.renter_id !== principal.subject) throw new ApiError('not_found', 'no such rental')
  return rental
}

/** The resume point: the Last-Event-ID header (what EventSource sends on reconnecting) over `?last_event_id=`. */
function resumePoint(header: string, query: URLSearchParams): EventPosition | undefined {
  const fromHeader = header !== ''
  const text = fromHeader ? header : query.get('last_event_id')
  if (text === null) return undefined
  const position = parseEventId(text.trim())
  if (position === undefined) throw new ApiError('invalid_request', `${fromHeader ? 'Last-Event-ID' : 'last_event_id'} must be an event_id this API sent`)
  return position
}

/**
 * The renter's channels on the log: the event stream (SSE), its tickets, and polling.
 * Returns what closes every open stream, for the gateway's drain.
 */
export function registerStreamRoutes(parts: JsonRoutesParts, o: StreamRouteOptions): { closeAll: () => void; stop: () => void } {
  const now = o.now ?? Date.now
  const sinks = new Set<SseSink>()
  const flushes = new FlushScheduler((err) => parts.logger.error({ err }, 'event stream flush failed'))
  const heartbeat = setInterval(() => {
    for (const s of sinks) s.ping()
  }, o.heartbeatMs)
  heartbeat.unref()

  jsonRoute(parts, 'post', '/v1/rentals/:rental_id/stream-tickets', { access: 'renter' }, async ({ principal, params, body }) => {
    noBody(body)
    const rental = ownRental(o.rentals, principal, params[0] as string)
    const ticket = randomBytes(32).toString('base64url')
    const expiresAt = now() + o.ticketTtlMs
    try {
      await o.tickets.put(hashTicket(ticket), { rental_id: rental.rental_id, renter_id: rental.renter_id }, expiresAt)
    } catch (err) {
      if (err instanceof TicketStoreFullError) throw new ApiError('overloaded', 'too many stream tickets are outstanding; retry', { retryAfter: 5, cause: err })
      throw err
    }
    return { status: 201, data: { ticket, rental_id: rental.rental_id, expires_at: new Date(expiresAt).toISOString() } }
  })

  getRoute(parts, '/v1/rentals/:rental_id/events', (reply, req, res) => {
    parts.track(reply)
    // Read now: uWS drops the request once this handler returns.
    const rentalId = pathParameter(req.getParameter(0) ?? '')
    const query = new URLSearchParams(req.getQuery() ?? '')
    let authCount = 0
    req.forEach((name) => {
      if (name === 'authorization') authCount++
    })
    const principal = authCount === 1 ? bearerPrincipal(parts.registry, req.getHeader('authorization')) : undefined
    const lastEventId = req.getHeader('last-event-id')
    const ticket = query.get('ticket')
    let session: StreamSession | undefined
    let sink: SseSink | undefined
    let reserved = false
    const release = () => {
      if (!reserved) return
      reserved = false
      if (sink !== undefined) sinks.delete(sink)
      o.hub.release(rentalId, session)
    }
    reply.onAbort = () => {
      sink?.aborted()
      release()
    }
    const fail = (err: unknown) => {
      release()
      if (sink !== undefined) {
        // The status is out: cut the stream; the client resumes from its last event id.
        parts.logger.warn({ request_id: reply.requestId, err }, 'event stream failed; connection closed')
        if (!sink.closed && !reply.aborted) res.close()
        return
      }
      if (err instanceof ApiError) return reply.fail(err)
      parts.logger.error({ request_id: reply.requestId, err }, 'event stream failed')
      reply.fail(new ApiError('internal_error', 'internal error; retry later'))
    }
    if (parts.isDraining()) return reply.fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }))
    Promise.resolve()
      .then(async () => {
        let rental: RentalRecord
        if (ticket !== null) {
          if (authCount > 0) throw new ApiError('invalid_request', 'send either a ticket or an Authorization header, not both')
          const grant = TICKET.test(ticket) ? await o.tickets.take(hashTicket(ticket), now()) : undefined
          if (grant === undefined) throw new ApiError('unauthorized', 'the ticket is unknown, used or expired; request a new one')
          const held = o.rentals.get(rentalId)
          if (grant.rental_id !== rentalId || held === undefined || held.renter_id !== grant.renter_id) throw new ApiError('not_found', 'no such rental')
          rental = held
        } else {
          if (principal === undefined) throw new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header or a ?ticket= is required')
          rental = ownRental(o.rentals, principal, rentalId)
        }
        const resume = resumePoint(lastEventId, query)
        if (reply.aborted) return
        // After the rental's last event nothing follows: 204 tells EventSource to stop reconnecting.
        if (resume?.end === true) return reply.sendText(204, 'text/event-stream', '')
        if (reply.head) return reply.sendText(200, 'text/event-stream; charset=utf-8', '')
        if (!o.hub.reserve(rentalId)) throw new ApiError('rate_limited', 'this rental has the most event streams open at once; close one or retry later', { retryAfter: CAP_RETRY_AFTER_S })
        reserved = true
        sink = new SseSink(res, reply, o.bufferBytes, flushes, () => o.hub.eventsSent++, () => o.hub.slowDisconnects++, () => release())
        sinks.add(sink)
        sink.begin(o.retryMs)
        const opened = await o.hub.open(rental, sink, resume)
        session = opened
        // Ended while it opened (a final rental's replay, a slow reader): the place was given back without the session.
        if (sink.closed) o.hub.forget(rentalId, opened)
      })
      .catch(fail)
  })

  return {
    closeAll: () => {
      for (const s of sinks) s.end()
      sinks.clear()
    },
    stop: () => clearInterval(heartbeat),
  }
}
