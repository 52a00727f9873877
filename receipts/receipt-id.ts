import { createHash } from 'node:crypto'

/**
 * A receipt's id, derived from what identifies the signal for good: its source and its
 * signal_id. Not from the log sequence, which a move from the journal to JetStream
 * renumbers, nor from received_at, which a signal_id accepted again after the dedup
 * window would change: the same signal always maps to the same receipt, so a redelivery,
 * a replay after a crash or a reused signal_id can never make a second one.
 * `rc_` and 32 lowercase hex digits (the first 128 bits of a SHA-256).
 */
export function receiptIdOf(sourceId: string, signalId: string): string {
  // The NUL cannot occur in either id, so no two pairs hash the same text.
  return `rc_${createHash('sha256').update(`receipt\0${sourceId}\0${signalId}`).digest('hex').slice(0, 32)}`
}

export const RECEIPT_ID_PATTERN = /^rc_[0-9a-f]{32}$/

export const isReceiptId = (value: string): boolean => RECEIPT_ID_PATTERN.test(value)
