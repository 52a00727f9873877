import { createHash, randomBytes } from 'node:crypto'
import { StreamLimitError, StreamPlacesUnavailableError, TicketLimitError, TicketStoreFullError, type EventPosition, type RentalDisputes, type StreamHub, type StreamPlace, type StreamSession, type TicketStore } from '../../delivery/index.js'
import type { SignalLog } from '../../pipeline/index.js'
import type { Principal } from '../../registry/index.js'
import type { RentalRecord, Rentals } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'
import { bearerPrincipal } from '../http/bearer.js'
import { getRoute, jsonRoute, pathParameter, type JsonRoutesParts } from '../http/json-route.js'
import { noBody } from '../control/access.js'
import { param, parseQuery } from '../http/query.js'
import { FlushScheduler } from './sse-flush.js'
import { checkedResumePoint } from './resume-point.js'
import { SseSink } from './sse-sink.js'

export interface StreamRouteOptions {
  readonly hub: StreamHub
  readonly rentals: Rentals
  readonly tickets: TicketStore
  /** The signal log, to check a resume point against. */
  readonly log: SignalLog
  readonly ticketTtlMs: number
  readonly heartbeatMs: number
  readonly retryMs: number
  readonly bufferBytes: number
  /** A stream whose reader takes nothing for this long while a write waits is closed (stalled_reader). */
  readonly stallMs: number
  readonly now?: () => number
}

/** A ticket as issued: 32 random bytes, base64url (43 characters). */
const TICKET = /^[A-Za-z0-9_-]{43}$/
/** Seconds a client waits before trying again when the cap's places cannot be counted (the shared store is briefly away). */
const PLACES_RETRY_AFTER_S = 1

const hashTicket = (ticket: string) => createHash('sha256').update(ticket).digest('hex')
const unusableTicket = () => new ApiError('unauthorized', 'the ticket is unknown, used or expired, or its token was revoked; request a new one')

/** Sets of things by owner, an empty set dropped. */
class OwnerSets<T> {
  readonly #sets = new Map<string, Set<T>>()
  add(owner: string, item: T): void {
    let set = this.#sets.get(owner)
    if (set === undefined) this.#sets.set(owner, (set = new Set()))
    set.add(item)
  }
  delete(owner: string, item: T): void {
    const set = this.#sets.get(owner)
    if (set?.delete(item) === true && set.size === 0) this.#sets.delete(owner)
  }
  /** The owner's items, no longer held. */
  take(owner: string): T[] {
    const set = this.#sets.get(owner)
    this.#sets.delete(owner)
    return set === undefined ? [] : [...set]
  }
}

/** A place under the rental's cap, its refusals as the client sees them. */
async function takePlace(hub: StreamHub, rentalId: string, onLost: () => void): Promise<StreamPlace> {
  try {
    return await hub.take(rentalId, onLost)
  } catch (err) {
    if (err instanceof StreamLimitError) {
      throw new ApiError('rate_limited', 'this rental has the most event streams open at once; close one or retry later', { retryAfter: Math.max(1, Math.ceil(err.retryAfterMs / 1000)), cause: err })
    }
    if (err instanceof StreamPlacesUnavailableError) throw new ApiError('overloaded', 'open event streams cannot be counted for a moment; retry', { retryAfter: PLACES_RETRY_AFTER_S, cause: err })
    throw err
  }
}

/** Only the rental's renter; anyone else gets the 404 of a rental that does not exist. */
function ownRental(rentals: Rentals, principal: Principal, rentalId: string): RentalRecord {
  if (principal.role !== 'renter') throw new ApiError('forbidden', 'rental event streams are for the rental\'s renter')
  const rental = rentals.get(rentalId)
  if (rental === undefined || rental.renter_id !== principal.subject) throw new ApiError('not_found', 'no such rental')
  return rental
}

/** Ticks of the heartbeat clock per heartbeat interval: a stream's ping comes 100 to 110 % of the interval after its last frame. */
const HEARTBEAT_STEPS = 10

/** Query parameters of the event stream: both are checked against state (the ticket store, the rental and the log). */
const STREAM_QUERY = { ticket: param.given, last_event_id: param.given }

/** The resume point: the Last-Event-ID header (what EventSource sends on reconnecting) over `?last_event_id=`. */
function resumePoint(header: string, fromQuery: string | undefined, rental: RentalRecord, o: StreamRouteOptions, disputes: RentalDisputes): Promise<EventPosition> | undefined {
  const fromHeader = header !== ''
  const text = fromHeader ? header : fromQuery
  if (text === undefined) return undefined
  return checkedResumePoint(text, fromHeader ? 'Last-Event-ID' : 'last_event_id', rental, o.log, disputes)
}

/**
 * The renter's channels on the log: the event stream (SSE), its tickets, and polling.
 * Returns what closes every open stream, for the gateway's drain.
 */
export function registerStreamRoutes(parts: JsonRoutesParts, o: StreamRouteOptions): { closeAll: () => void; stop: () => void } {
  const now = o.now ?? Date.now
  const sinks = new Set<SseSink>()
  const flushes = new FlushScheduler((err) => parts.logger.error({ err }, 'event stream flush failed'))
  // Each stream's heartbeat counts from its own last frame (its opening included): one clock
  // ticking a tenth of the interval serves them all, rather than a timer per stream.
  const heartbeat = setInterval(() => {
    for (const s of sinks) s.tick(HEARTBEAT_STEPS)
  }, o.heartbeatMs / HEARTBEAT_STEPS)
  heartbeat.unref()
  // Stalls are checked ten times per timeout, so a stalled stream is closed 100 to 110 % of
  // it after the socket last took something: always before uWS's own 10 s timeout, which
  // would close it unseen (STREAM_STALL_TIMEOUT_MS stays at or below 8 s for that).
  const stallClock = setInterval(() => {
    const at = Date.now()
    for (const s of sinks) s.checkStall(at, o.stallMs)
  }, Math.max(10, o.stallMs / 10))
  stallClock.unref()
  // A revoked token stops working at once: the streams it opened, itself or by a ticket, end.
  const byToken = new OwnerSets<SseSink>()
  const stopRevocations = parts.registry.watchRevocations((tokenIds) => {
    for (const id of tokenIds) for (const s of byToken.take(id)) s.end('token_revoked')
  })

  jsonRoute(parts, 'post', '/v1/rentals/:rental_id/stream-tickets', { access: 'renter' }, async ({ principal, params, body }) => {
    noBody(body)
    const rental = ownRental(o.rentals, principal, params[0] as string)
    const ticket = randomBytes(32).toString('base64url')
    const expiresAt = now() + o.ticketTtlMs
    try {
      await o.tickets.put(hashTicket(ticket), { rental_id: rental.rental_id, renter_id: rental.renter_id, ...(principal.tokenId !== null && { token_id: principal.tokenId }) }, expiresAt, now())
    } catch (err) {
      if (err instanceof TicketLimitError) {
        const what = err.scope === 'rental' ? 'this rental has' : 'you have'
        throw new ApiError('rate_limited', `${what} the most stream tickets outstanding at once; use or let expire one, or retry after Retry-After`, { retryAfter: Math.max(1, Math.ceil(err.retryAfterMs / 1000)), cause: err })
      }
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
    let session: StreamSession | undefined
    let sink: SseSink | undefined
    let place: StreamPlace | undefined
    let sinkToken: string | undefined
    const release = () => {
      if (place === undefined) return
      const held = place
      place = undefined
      if (sink !== undefined) sinks.delete(sink)
      if (sink !== undefined && sinkToken !== undefined) byToken.delete(sinkToken, sink)
      o.hub.release(held, session)
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
        if (!reply.aborted) sink.drop('error')
        return
      }
      if (err instanceof ApiError) return reply.fail(err)
      parts.logger.error({ request_id: reply.requestId, err }, 'event stream failed')
      reply.fail(new ApiError('internal_error', 'internal error; retry later'))
    }
    if (parts.isDraining()) return reply.fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }))
    // Every check comes before the ticket is spent, which is last, once a place is taken:
    // a request refused for its input, the cap or a rental it cannot open keeps its ticket.
    Promise.resolve()
      .then(async () => {
        const { ticket, last_event_id: lastEventIdParam } = parseQuery(query, STREAM_QUERY)
        let rental: RentalRecord
        let tokenId: string
        const ticketHash = ticket === undefined ? undefined : hashTicket(ticket)
        if (ticketHash !== undefined) {
          if (authCount > 0) throw new ApiError('invalid_request', 'send either a ticket or an Authorization header, not both')
          const grant = TICKET.test(ticket as string) ? await o.tickets.peek(ticketHash, now()) : undefined
          // A ticket of a revoked token is refused as the token would be.
          if (grant?.token_id === undefined || !parts.registry.tokenLive(grant.token_id)) throw unusableTicket()
          const held = o.rentals.get(rentalId)
          if (grant.rental_id !== rentalId || held === undefined || held.renter_id !== grant.renter_id) throw new ApiError('not_found', 'no such rental')
          rental = held
          tokenId = grant.token_id
        } else {
          if (principal === undefined) throw new ApiError('unauthorized', 'a valid Authorization: Bearer <token> header or a ?ticket= is required')
          rental = ownRental(o.rentals, principal, rentalId)
          tokenId = principal.tokenId as string
        }
        const resume = await resumePoint(lastEventId, lastEventIdParam, rental, o, parts.registry)
        if (reply.aborted) return
        if (!parts.registry.tokenLive(tokenId)) throw new ApiError('unauthorized', 'the token was revoked')
        // After the rental's last event nothing follows: 204 tells EventSource to stop reconnecting.
        if (resume?.end === true) {
          if (ticketHash !== undefined && (await o.tickets.take(ticketHash, now())) === undefined) throw unusableTicket()
          return reply.sendText(204, 'text/event-stream', '')
        }
        place = await takePlace(o.hub, rentalId, () => sink?.end('place_lost'))
        if (reply.aborted) return release()
        // Spent only now, with a place held: of two requests racing with one ticket, one gets it.
        if (ticketHash !== undefined && (await o.tickets.take(ticketHash, now())) === undefined) throw unusableTicket()
        if (reply.aborted) return release()
        if (!parts.registry.tokenLive(tokenId)) throw new ApiError('unauthorized', 'the token was revoked')
        // HEAD made every check GET makes, the place included, and gives the place back.
        if (reply.head) {
          release()
          return reply.sendText(200, 'text/event-stream; charset=utf-8', '')
        }
        sink = new SseSink(res, reply, o.bufferBytes, flushes, () => o.hub.eventsSent++, (reason) => o.hub.disconnected(reason), () => release())
        sinks.add(sink)
        byToken.add(tokenId, sink)
        sinkToken = tokenId
        sink.begin(o.retryMs)
        // Lost before the stream was there to end (the store could not be written in time).
        if (place?.held === false) sink.end('place_lost')
        const opened = await o.hub.open(rental, sink, resume)
        session = opened
        // Ended while it opened (a final rental's replay, a slow reader, a revocation): the place was given back without the session.
        if (sink.closed) o.hub.forget(rentalId, opened)
      })
      .catch(fail)
  })

  return {
    closeAll: () => {
      for (const s of sinks) s.end('shutdown')
      sinks.clear()
    },
    stop: () => {
      clearInterval(heartbeat)
      clearInterval(stallClock)
      stopRevocations()
    },
  }
}
