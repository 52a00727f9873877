import type { Receipt } from '../../receipts/index.js'

/**
 * Fields a public reader does not get. The public view is the signal record a prospective
 * renter judges a source by: what was signalled (token, severity, confidence), when
 * (emitted_at, and received_at, which proves the signal existed then), how it scored and
 * whether it was disputed. Left out is what the creator's operation carries beyond it:
 * signal_id (the creator's own identifier, which may name its internal systems or
 * sequence), key_id (which signing key, and so when keys rotate), note (free text that
 * may name wallets or reasoning), recorded_at (the store's own timing) and test (always
 * false for the public, which never sees test receipts).
 */
export const PUBLIC_REDACTED_FIELDS = ['signal_id', 'key_id', 'note', 'recorded_at', 'test'] as const

export type PublicReceipt = Omit<Receipt, (typeof PUBLIC_REDACTED_FIELDS)[number]>

export function publicReceipt(r: Receipt): PublicReceipt {
  return {
    receipt_id: r.receipt_id,
    source_id: r.source_id,
    agent_id: r.agent_id,
    token: r.token,
    severity: r.severity,
    confidence: r.confidence,
    emitted_at: r.emitted_at,
    received_at: r.received_at,
    window_start: r.window_start,
    window_end: r.window_end,
    baseline: r.baseline,
    outcome: r.outcome,
    dispute_status: r.dispute_status,
  }
}
