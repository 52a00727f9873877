import type { RentalRecord } from '../../rentals/index.js'
import { DisputeQueue, type PlacedEvent, type RentalCursor, type RentalDisputes } from '../rental-events.js'
import type { WebhookState } from './webhook-state.js'

/**
 * Delivers a rental's dispute events placed after `from` (the last one delivered), up to
 * after record `throughSeq` (every record of the rental's to there is delivered), in the
 * rental's order, each remembered in the webhook state once delivered or dead-lettered:
 * a restart resumes after it, and a dispute accepted while the log is idle is still owed.
 * Returns the last one's place, or 'stopped' when the endpoint stopped meanwhile.
 */
export async function deliverDisputeEvents(
  o: { readonly disputes: RentalDisputes; readonly state: WebhookState },
  rentalId: string,
  rental: RentalRecord,
  from: RentalCursor,
  throughSeq: number,
  deliver: (seq: number, eventId: string, event: Record<string, unknown>) => Promise<'delivered' | 'dead' | 'stopped'>,
): Promise<RentalCursor | 'stopped'> {
  let last = from
  const queue = new DisputeQueue(o.disputes, rental, from, throughSeq)
  for (let d: PlacedEvent | undefined = queue.through(throughSeq); d !== undefined; d = queue.through(throughSeq)) {
    const { cursor, event } = d
    if ((await deliver(cursor.seq, event.event_id, event as unknown as Record<string, unknown>)) === 'stopped') return 'stopped'
    const at = cursor.dispute ?? { order: 0, signalSeq: 0 }
    await o.state.setDisputeCursor(rentalId, { seq: cursor.seq, order: at.order, signal_seq: at.signalSeq })
    last = cursor
  }
  return last
}
