import type { SignalRecord } from '../pipeline/index.js'
import type { SignalAcceptedEvent } from '../schemas/index.js'

/**
 * The renter-facing event for one logged signal, or undefined when the signal must not
 * be delivered: a pending key's test signal is recorded but never delivered. The event
 * carries the normalised fields only; renters never see the raw body, the signature,
 * the nonce or the key id (spec 5.4).
 */
export function signalAcceptedEvent(record: SignalRecord, rentalId: string): SignalAcceptedEvent | undefined {
  if (record.test) return undefined
  return {
    event: 'byo.signal.accepted',
    rental_id: rentalId,
    source_id: record.source_id,
    signal_id: record.signal_id,
    token: record.token,
    severity: record.severity,
    emitted_at: record.emitted_at,
    received_at: record.received_at,
  }
}
