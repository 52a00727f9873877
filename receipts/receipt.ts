/**
 * A receipt: the recorded, scored and disputable trace of one accepted signal. Field
 * names are the read API's. Timestamps are ISO 8601 UTC with milliseconds
 * (`2025-01-02T03:04:05.678Z`).
 */
export interface Receipt extends ReceiptInput {
  readonly receipt_id: string
  /** When the store first recorded it. */
  readonly recorded_at: string
  readonly window_start: string | null
  readonly window_end: string | null
  readonly baseline: number | null
  readonly outcome: Outcome
  readonly dispute_status: DisputeStatus
}

export const OUTCOMES = ['pending', 'hit', 'miss', 'void'] as const
export type Outcome = (typeof OUTCOMES)[number]
export type ScoredOutcome = Exclude<Outcome, 'pending'>

export const DISPUTE_STATUSES = ['none', 'open', 'disputed', 'rejected'] as const
export type DisputeStatus = (typeof DISPUTE_STATUSES)[number]

/**
 * What the recorder hands the store for one accepted signal (from its log record and the
 * source's agent); a receipt carries these fields as given. `emitted_at` is the payload's
 * `ts`; `received_at` the 202's; `test` marks a pending key's test signal, shown to its
 * creator only, never listed for others nor exported.
 */
export interface ReceiptInput {
  readonly source_id: string
  readonly agent_id: string
  readonly signal_id: string
  readonly key_id: string
  readonly token: string
  readonly severity: string
  readonly confidence: number | null
  readonly note: string | null
  readonly test: boolean
  /** ISO 8601 UTC. */
  readonly emitted_at: string
  /** ISO 8601 UTC. */
  readonly received_at: string
}

export interface RecordResult {
  /** Receipts written by this call. */
  readonly recorded: number
  /** Inputs whose (source_id, signal_id) was already recorded (a redelivery, or a signal_id reused later): nothing written. */
  readonly alreadyRecorded: number
}

/** One item of a scorer's post. */
export interface OutcomeInput {
  readonly receipt_id: string
  /** ISO 8601 UTC. */
  readonly window_start: string
  /** ISO 8601 UTC, not before window_start. */
  readonly window_end: string
  readonly baseline: number
  readonly outcome: ScoredOutcome
  /** ISO 8601 UTC: the newest scored_at of a receipt wins; an older one changes nothing. */
  readonly scored_at: string
}

export type OutcomeRefusal = 'unknown_receipt' | 'invalid_item'

export interface OutcomeResult {
  /** Items stored (an item older than what is stored is stored too, and loses at read). */
  readonly accepted: number
  /** Items refused, each named by its position in the post and its receipt_id. */
  readonly refused: readonly { readonly index: number; readonly receipt_id: string; readonly reason: OutcomeRefusal; readonly message: string }[]
}

/** A dispute's effect on a receipt it names. */
export interface DisputeStatusInput {
  readonly source_id: string
  readonly signal_id: string
  /** The signal's emitted_at (from its log record): it places the status beside the receipt even before the recorder reaches it. */
  readonly emitted_at: string
  /** `open` when the dispute opens; `disputed` (accepted) or `rejected` when it is resolved. */
  readonly dispute_status: Exclude<DisputeStatus, 'none'>
  /** ISO 8601 UTC. */
  readonly changed_at: string
}

/** A source's non-test receipts in figures, for its public status. */
export interface SourceStats {
  /** Receipts by outcome; `pending` until a scorer posted one. */
  readonly outcomes: Readonly<Record<Outcome, number>>
  /** The newest received_at (ms since the epoch); null when the source has no receipt. */
  readonly lastReceivedMs: number | null
  /** Distinct UTC clock hours within the asked span in which at least one receipt was received. */
  readonly hoursWithSignals: number
}
