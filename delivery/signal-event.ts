import type { LogRecord, SignalRecord } from '../pipeline/index.js'
import { decodeSignalRecord } from '../pipeline/index.js'
import { isActive, type RentalRecord } from '../rentals/index.js'
import { receiptIdOf } from '../receipts/index.js'
import { passesFilter, type RentalEndedEvent, type SignalAcceptedEvent } from '../schemas/index.js'
import { endedEventId, signalEventId } from './event-id.js'

/**
 * The renter-facing event for one logged signal, or undefined when the signal must not
 * be delivered: a pending key's test signal is recorded but never delivered. The event
 * carries the normalised fields only; renters never see the raw body, the signature,
 * the nonce or the key id.
 */
export function signalAcceptedEvent(record: SignalRecord, rentalId: string, seq: number): SignalAcceptedEvent | undefined {
  if (record.test) return undefined
  return {
    event: 'byo.signal.accepted',
    event_id: signalEventId(seq),
    rental_id: rentalId,
    source_id: record.source_id,
    signal_id: record.signal_id,
    token: record.token,
    severity: record.severity,
    emitted_at: record.emitted_at,
    received_at: record.received_at,
    receipt_id: receiptIdOf(record.source_id, record.signal_id),
    confidence: record.confidence ?? null,
    note: record.note ?? null,
  }
}

/**
 * The rental's event for a log record, or undefined when the record is not the rental's:
 * another source's, a test signal, received outside the rental's span (before
 * starts_at, or from its end on), or left out by the renter's delivery filter. Pass the
 * rental as it stands now, so an end or a new filter is seen.
 */
export function rentalEventOf(log: LogRecord, rental: RentalRecord, decodeRecord: (data: Uint8Array) => SignalRecord | undefined = decodeSignal): SignalAcceptedEvent | undefined {
  // The log's own source tag skips other sources without decoding them ('' in old journals: decode).
  if (log.sourceId !== '' && log.sourceId !== rental.source_id) return undefined
  const record = decodeRecord(log.data)
  if (record === undefined || record.source_id !== rental.source_id || record.test) return undefined
  const received = Date.parse(record.received_at)
  if (Number.isNaN(received) || !isActive(rental, received) || !passesFilter(rental.filter, record)) return undefined
  return signalAcceptedEvent(record, rental.rental_id, log.seq)
}

/** The rental's last event, for a final rental; `afterSeq` is the log position it follows. */
export function rentalEndedEvent(rental: RentalRecord, afterSeq: number): RentalEndedEvent {
  return {
    event: 'byo.rental.ended',
    event_id: endedEventId(afterSeq),
    rental_id: rental.rental_id,
    source_id: rental.source_id,
    state: rental.state === 'expired' ? 'expired' : 'ended',
    ended_at: rental.ended_at ?? rental.expires_at ?? new Date().toISOString(),
  }
}

/** The signal record in a log record's data, or undefined when it is not one. */
export function decodeSignal(data: Uint8Array): SignalRecord | undefined {
  try {
    return decodeSignalRecord(data)
  } catch {
    // Not a signal record (a dispute placement, a post of outcomes, or unreadable): nothing a renter receives.
    return undefined
  }
}
