import type { RentalRecord } from '../../rentals/index.js'
import { parseEventId } from '../event-id.js'
import { cursorOf, DisputeQueue, type RentalCursor, type RentalDisputes } from '../rental-events.js'
import type { PendingDelivery } from './webhook-state.js'

/**
 * What a webhook loop checks of the accepted disputes, whose events it delivers in their
 * place among the rental's records (rental-events.ts). The loop itself delivers them: before
 * each record, those placed before it; when it waits, those placed up to the tail's position.
 */

/**
 * Whether a loop done with the rental's records up to `seq` may move its position to
 * after record `seq` without delivering anything first: no dispute event after `cursor`
 * is placed before that record. (The loop met every dispute placement of the rental's
 * source up to `seq` among its records and waited there.)
 */
export function mayPassNow(disputes: RentalDisputes, rental: RentalRecord, cursor: RentalCursor, seq: number): boolean {
  if (disputes.acceptedDisputesOf(rental.source_id).length === 0) return true
  return !new DisputeQueue(disputes, rental, cursor, seq - 1).has(seq - 1)
}

/** The place in the rental's order of the event a stored retry state is about (a dispute event's, from its id). */
export function placeOfPending(pending: PendingDelivery, disputes: RentalDisputes, sourceId: string): RentalCursor {
  const position = pending.event_id === undefined ? undefined : parseEventId(pending.event_id)
  return position === undefined ? { seq: pending.seq } : cursorOf(position, disputes, sourceId)
}
