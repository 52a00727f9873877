import type { LogRecord, SignalRecord } from '../pipeline/index.js'
import type { RentalRecord } from '../rentals/index.js'
import type { SignalAcceptedEvent } from '../schemas/index.js'
import { decodeSignal, rentalEventOf } from './signal-event.js'

interface Made {
  /** The rental as it stood when the event was made: one whose span changed since (an end) is looked at afresh. */
  readonly rental: RentalRecord
  readonly event: SignalAcceptedEvent | undefined
}

const decoded = new WeakMap<Uint8Array, SignalRecord | null>()
const made = new WeakMap<LogRecord, Map<string, Made>>()

/** Decodes a record's data once however many rentals look at it. */
function decodeOnce(data: Uint8Array): SignalRecord | undefined {
  let record = decoded.get(data)
  if (record === undefined) decoded.set(data, (record = decodeSignal(data) ?? null))
  return record ?? undefined
}

/**
 * `rentalEventOf` for the live fan-out, made once per log record and rental. The live
 * tail hands the same record objects to every stream of a source, so the record is
 * decoded once for all of them and the streams of one rental get the same event object,
 * which the SSE sink serialises once for all of them. The result is exactly
 * `rentalEventOf(record, rental)`: it is reused only while the rental has the same
 * source, span and filter (what that function reads of it). Entries live as long as the record does.
 */
export function sharedRentalEvent(record: LogRecord, rental: RentalRecord): SignalAcceptedEvent | undefined {
  let byRental = made.get(record)
  if (byRental === undefined) made.set(record, (byRental = new Map()))
  const hit = byRental.get(rental.rental_id)
  if (hit !== undefined && sameSpan(hit.rental, rental)) return hit.event
  const event = rentalEventOf(record, rental, decodeOnce)
  byRental.set(rental.rental_id, { rental, event })
  return event
}

/** The fields of a rental that rentalEventOf and isActive read (a filter is replaced, never changed in place). */
function sameSpan(a: RentalRecord, b: RentalRecord): boolean {
  if (a === b) return true
  return a.filter === b.filter && a.source_id === b.source_id && a.starts_at === b.starts_at && a.expires_at === b.expires_at && a.ended_at === b.ended_at && (a.state === 'ended') === (b.state === 'ended')
}
