import { compareCursors, cursorEventId, cursorOf, lastEventSeq, parseEventId, rentalEndedEvent, scanRentalEvents, signalEventId } from '../../delivery/index.js'
import type { SignalLog } from '../../pipeline/index.js'
import { isFinal, type Rentals } from '../../rentals/index.js'
import { ApiError, type DeliveryEvent } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { checkedResumePoint } from './resume-point.js'

export const POLL_PAGE = { default: 100, max: 1000 } as const
/** Log records one poll reads at most (the journal has no index by source): past it the page ends early with a cursor. */
export const POLL_SCAN_MAX = 50_000
/** `after` is checked against the rental and the log (checkedResumePoint). */
const POLL_QUERY = { after: param.given, limit: param.limit(POLL_PAGE) }

export interface PollRouteOptions {
  readonly log: SignalLog
  readonly rentals: Rentals
  /** As the streams wait after a rental's end before its last event (StreamHub's endSettleMs). */
  readonly endSettleMs: number
  readonly now?: () => number
}

/**
 * Polling, the fallback of the stream: the same events, in the same order, with the same
 * ids, a page at a time. `after` is the last event_id the client has; `next_cursor` is
 * what to pass next, null when nothing follows yet (poll again with the same `after`).
 */
export function registerPollRoute(parts: JsonRoutesParts, o: PollRouteOptions): void {
  const now = o.now ?? Date.now
  jsonRoute(parts, 'get', '/v1/rentals/:rental_id/signals', { access: 'renter' }, async ({ principal, params, query }) => {
    const { after: afterText, limit } = parseQuery(query, POLL_QUERY)
    const rentalId = params[0] as string
    const rental = o.rentals.get(rentalId)
    if (rental === undefined || rental.renter_id !== principal.subject) throw new ApiError('not_found', 'no such rental')
    const after = afterText === undefined ? undefined : await checkedResumePoint(afterText, 'after', rental, o.log, parts.registry)
    // After the rental's last event nothing follows.
    if (after?.end === true) return { status: 200, data: [], nextCursor: null }
    const start = after === undefined ? undefined : cursorOf(after, parts.registry, rental.source_id)
    const toSeq = (await o.log.info()).lastSeq
    const scanStart = start === undefined ? {} : { afterSeq: start.seq, ...(start.dispute && { dispute: start.dispute }) }
    let scan = await scanRentalEvents(o.log, () => o.rentals.get(rentalId), scanStart, toSeq, limit, POLL_SCAN_MAX, parts.registry)
    // Stopped at a dispute placement before any event: wait for it to settle (milliseconds, unless its acceptance failed) and scan once more.
    if (scan.waitingFor !== undefined && scan.events.length === 0 && scan.lost === null) {
      await parts.registry.disputeGate.until(scan.waitingFor)
      scan = await scanRentalEvents(o.log, () => o.rentals.get(rentalId), scanStart, toSeq, limit, POLL_SCAN_MAX, parts.registry)
    }
    const data: DeliveryEvent[] = []
    if (scan.lost !== null) {
      data.push({ event: 'byo.stream.gap', event_id: signalEventId(scan.lost.toSeq), rental_id: rentalId, from_event_id: signalEventId(scan.lost.fromSeq - 1), to_event_id: signalEventId(scan.lost.toSeq), count: scan.lost.count })
    }
    data.push(...scan.events)
    const current = o.rentals.get(rentalId)
    const caughtUp = scan.complete && scan.events.length < limit
    if (caughtUp && current !== undefined && isFinal(current) && now() >= Date.parse(current.ended_at ?? '') + o.endSettleMs) {
      // The rental's last event met on this page saves reading back for it.
      const lastMet = [...scan.events].reverse().find((e) => e.event === 'byo.signal.accepted' || e.event === 'byo.signal.disputed')
      const known = lastMet === undefined ? undefined : parseEventId(lastMet.event_id)?.seq
      const ended = rentalEndedEvent(current, await lastEventSeq(o.log, current, parts.registry, Math.max(scan.scannedTo, after?.seq ?? 0), known))
      data.push(ended)
      return { status: 200, data, nextCursor: ended.event_id }
    }
    // The cursor names the scan's last point (a record looked at, or a dispute event sent), so the next page resumes exactly there.
    const moved = compareCursors(scan.cursor, start ?? { seq: 0 }) > 0
    return { status: 200, data, nextCursor: moved ? cursorEventId(scan.cursor) : data.length > 0 ? (data[data.length - 1] as DeliveryEvent).event_id : null }
  })
}
