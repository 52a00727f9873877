import { decodeSignalRecord, type LogRecord } from '../../pipeline/index.js'
import { isActive, type RentalRecord } from '../../rentals/index.js'
import { passesFilter } from '../../schemas/index.js'
import { signalEventId } from '../event-id.js'
import { signalAcceptedEvent } from '../signal-event.js'

/** The event id of the log record `seq`: the one the streams and polling send, so a webhook's event and a stream's are the same resume point. */
export const eventIdOf = signalEventId

/** The `webhook-id` of an event for a rental (a log seq: its record's event; or an event id): the same on every retry and re-send of it. */
export function webhookIdOf(rentalId: string, event: number | string): string {
  return `msg_${rentalId}_${typeof event === 'number' ? eventIdOf(event) : event}`
}

/**
 * The webhook body of a log record for a rental, or undefined when the rental does not
 * receive it (test signal, outside its active time, another source) or, unless `asked`,
 * when the renter's delivery filter leaves it out: a re-send of one event the renter
 * named (`asked`) is delivered whatever the filter says.
 */
export function webhookEventOf(record: LogRecord, rental: RentalRecord, asked = false): Record<string, unknown> | undefined {
  let signal
  try {
    // Throws for a marker too (a dispute placement, a post of outcomes): no signal, no event.
    signal = decodeSignalRecord(record.data)
  } catch {
    return undefined
  }
  if (signal.source_id !== rental.source_id) return undefined
  if (!isActive(rental, Date.parse(signal.received_at))) return undefined
  if (!asked && !passesFilter(rental.filter, signal)) return undefined
  return signalAcceptedEvent(signal, rental.rental_id, record.seq) as Record<string, unknown> | undefined
}
