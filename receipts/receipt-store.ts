import type { ActivityCounts, ActivityWindow } from './receipt-activity.js'
import type { DisputeStatus, DisputeStatusInput, Outcome, OutcomeInput, OutcomeResult, Receipt, ReceiptInput, RecordResult, SourceStats } from './receipt.js'

/** The list filters; every one is optional and they combine with AND. */
export interface ReceiptFilter {
  /** `emitted_at` at or after this instant (ms since the epoch). */
  readonly from?: number
  /** `emitted_at` before this instant (ms since the epoch). */
  readonly to?: number
  readonly outcome?: Outcome
  readonly severity?: string
  readonly token?: string
  /** The dispute status. */
  readonly status?: DisputeStatus
  readonly source_id?: string
  readonly agent_id?: string
  /** The creator's signal id: one receipt of a source at most (several across sources). */
  readonly signal_id?: string
  /**
   * Only receipts of these sources (an empty list matches none): the read API's access
   * scope (a renter's rented sources, a creator's own), not a client's filter, so a
   * cursor stays valid while the set changes between pages.
   */
  readonly source_ids?: readonly string[]
}

/** A row of an export, by the columns its order sorts on: where a continued export starts (strictly after). */
export interface ExportPosition {
  readonly source_id: string
  /** `emitted_at` in ms since the epoch. */
  readonly emitted_at_ms: number
  readonly receipt_id: string
}

export interface ReceiptListQuery extends ReceiptFilter {
  /** 1 to 1,000; 100 when absent. */
  readonly limit?: number
  /** `next_cursor` of the previous page, with the same filters. */
  readonly cursor?: string
  /** Also list test receipts: for the creator of the source only, never for anyone else. */
  readonly includeTest?: boolean
}

export interface ReceiptPage {
  /** Newest first: `emitted_at` descending, then `receipt_id` descending. */
  readonly receipts: readonly Receipt[]
  /** Absent on the last page. */
  readonly next_cursor?: string
}

export type ExportFormat = 'ndjson' | 'csv' | 'parquet'

/**
 * The receipt store. `record` is what the recorder calls with each batch of log records,
 * acknowledging its log position only after it resolved; everything else is the read API's.
 *
 * Exactly once: a receipt's id is derived from (source_id, signal_id), so recording the
 * same signal again (a redelivered batch, a batch cut short by a crash, a signal_id the
 * log accepted again much later) never makes a second receipt, and no read counts one
 * twice. Errors are ReceiptStoreError: `unavailable` is worth retrying, the rest are not.
 */
export interface ReceiptStore {
  /** Creates or migrates the schema (refusing one newer than this code). Idempotent. */
  open(): Promise<void>
  /**
   * Records a batch of accepted signals; resolves once the store confirmed the write.
   * `verify`: the batch may have been written before a crash (the first batch after a
   * start, or after a failed attempt): also look for its receipts themselves, not only in
   * the look-up of recorded ids, which a crash between the two writes of an insert can
   * leave behind; such ids are listed again and nothing is written twice. Without
   * `verify`, a store tracking its recorded ids (`trackRecordedIds`) looks up only the ids
   * it may hold.
   */
  record(batch: readonly ReceiptInput[], options?: { readonly verify?: boolean }): Promise<RecordResult>
  /**
   * Builds the filter of recorded ids `record` consults; resolves once it is in use. It knows
   * what the store held when built and what `record` handled since: the caller asks `verify`
   * for any batch another writer may have written after that.
   */
  trackRecordedIds?(): Promise<void>
  /** One receipt by id, test receipts included (the caller decides who may see one). */
  get(receiptId: string): Promise<Receipt | undefined>
  /** One page of receipts in the documented order. Test receipts only with includeTest. */
  list(query: ReceiptListQuery): Promise<ReceiptPage>
  /**
   * Every receipt matching the filter, in the table's order (source_id, then emitted_at and
   * receipt_id ascending), as the bytes of the chosen format
   * (NDJSON, CSV with a header line, Parquet), produced by ClickHouse itself and pulled
   * chunk by chunk as the consumer reads. Aborting `signal` (or returning early from the
   * iteration) stops the query. Never includes test receipts. With `after`, only the rows
   * that follow that row in the same order, and a CSV without its header line: the
   * continuation of an export cut short, appended to the rows already received.
   */
  export(filter: ReceiptFilter, format: ExportFormat, signal?: AbortSignal, after?: ExportPosition): AsyncIterable<Uint8Array>
  /** A scorer's post of up to 1,000 outcomes. The newest scored_at per receipt wins. */
  recordOutcomes(items: readonly OutcomeInput[]): Promise<OutcomeResult>
  /** Dispute status changes of the receipts disputes name; a resolution outranks `open`. */
  recordDisputeStatuses(items: readonly DisputeStatusInput[]): Promise<void>
  /** A source's non-test receipts in figures (counts by outcome, last received_at, hours with signals within [fromMs, toMs)): its public status. */
  sourceStats(sourceId: string, hours: { readonly fromMs: number; readonly toMs: number }): Promise<SourceStats>
  /**
   * A source's non-test receipts counted per minute or hour of emitted_at, by severity and
   * by outcome, over a window of at most ACTIVITY_MAX_BUCKETS buckets: every bucket, oldest first.
   */
  sourceActivity(sourceId: string, window: ActivityWindow): Promise<ActivityCounts[]>
  /** Resolves when the store answers a query; throws `unavailable` when it does not. */
  ping(): Promise<void>
  /** Waits for work under way and releases the engine or connection. Safe to call twice. */
  close(): Promise<void>
}
