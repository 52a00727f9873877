import { cursorOf, parseEventId, type EventPosition, type RentalDisputes } from '../../delivery/index.js'
import type { SignalLog } from '../../pipeline/index.js'
import { isFinal, type RentalRecord } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'

/**
 * The position a client's resume point names (`Last-Event-ID`, `last_event_id`, `after`),
 * refused with `400 invalid_request` naming `field` unless it is an id this API could have
 * sent for the rental: well formed; a `.end` id only once the rental has ended; a seq no
 * further than the log's last record; a dispute id only where an accepted dispute of the
 * rental's source is placed and names that signal. Every id a channel sends meets these
 * (a gap's id is a record's seq, a polling cursor a seq looked at), so none is refused back.
 */
export async function checkedResumePoint(
  text: string,
  field: string,
  rental: RentalRecord,
  log: SignalLog,
  disputes: RentalDisputes,
): Promise<EventPosition> {
  const position = parseEventId(text.trim())
  if (position === undefined) throw new ApiError('invalid_request', `${field} must be an event_id this API sent`)
  if (position.end && !isFinal(rental)) throw new ApiError('invalid_request', `${field} names the end of the rental, which has not ended: it is not an event_id this API sent`)
  const { lastSeq } = await log.info()
  if (position.seq > lastSeq) throw new ApiError('invalid_request', `${field} is past the last event the signal log holds: it is not an event_id this API sent`)
  if (position.disputedSeq !== undefined && cursorOf(position, disputes, rental.source_id).dispute === undefined) {
    throw new ApiError('invalid_request', `${field} names no dispute event of this rental's source: it is not an event_id this API sent`)
  }
  return position
}
