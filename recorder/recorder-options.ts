import type { LogConsumer, SignalLog } from '../pipeline/index.js'
import type { ReceiptStore } from '../receipts/index.js'
import type { DisputeRecord } from '../registry/index.js'

/** What the recorder reads of the registry. */
export interface RecorderRegistry {
  /** Live and retired sources: a retired source still owns the receipts of what it accepted. */
  anySource(sourceId: string): { readonly agent_id: string } | undefined
  allDisputes(): readonly DisputeRecord[]
  /** Calls the listener after each recorded change of disputes; returns how to stop. */
  watchDisputes(listener: (changed: readonly DisputeRecord[]) => void): () => void
}

export interface RecorderLogger {
  info(obj: object, msg: string): void
  warn(obj: object, msg: string): void
  error(obj: object, msg: string): void
}

export interface RecorderOptions {
  readonly log: SignalLog
  readonly store: ReceiptStore
  readonly registry: RecorderRegistry
  /** The log's last seq, read without waiting (the ingest pipeline's): lag is this less the acknowledged position. */
  readonly lastSeq: () => number
  readonly logger: RecorderLogger
  /** Receipts per store write, 1 to RECORD_BATCH_MAX (default 5000). */
  readonly batchMax?: number
  /** How long a batch that is not full waits for more records after its first (default 500 ms): fewer, larger inserts; at most about this plus one insert of recording delay while batches do not fill. */
  readonly flushMs?: number
  /** First wait after a failed write (default 100 ms); doubled per failure. */
  readonly retryBaseMs?: number
  /** Longest wait between attempts, and the wait after an error a retry is not expected to fix soon (default 30 s). */
  readonly retryMaxMs?: number
  /** How long a record of a source the registry does not know holds the recorder up before it is recorded without an agent (default 10 s). */
  readonly unknownSourceGraceMs?: number
  /** The durable consumer's name (default `recorder`). */
  readonly consumerName?: string
  /**
   * Opens the consumer instead of `log.consumer(consumerName)`: a consumer opened under a
   * lease, where other processes of a cluster could pull the same one.
   */
  readonly openConsumer?: (signal: AbortSignal) => Promise<LogConsumer>
  /**
   * `openConsumer` waits while another process pulls the consumer: until it resolves the
   * recorder is a standby (state `standby`, no lag of its own).
   */
  readonly standby?: boolean
  readonly now?: () => number
}

export type RecorderState = 'starting' | 'standby' | 'running' | 'retrying' | 'caught_up' | 'stopped'

/** The recorder as /readyz shows it. */
export interface RecorderStatus {
  readonly state: RecorderState
  /** Log records not yet recorded and acknowledged. */
  readonly lag_records: number
  /** Age of the oldest of them, in seconds (0 when caught up). */
  readonly lag_seconds: number
  /** Disputes whose state is not yet on the receipts they name. */
  readonly disputes_pending: number
  /** While retrying: what failed. */
  readonly last_error?: string
}

/** Running totals since start, read at scrape time. */
export interface RecorderCounts {
  /** Receipts written. */
  readonly recorded: number
  /** Records whose receipt already existed (redeliveries, signal_ids accepted again): nothing written. */
  readonly alreadyRecorded: number
  readonly batchesOk: number
  /** Batch attempts that failed and were retried. */
  readonly batchesRetried: number
  /** Records retention removed before the recorder read them. */
  readonly lostRecords: number
  /** Records that are not signal records this code can read (skipped, each logged). */
  readonly undecodableRecords: number
  /** Receipts recorded with an empty agent_id because their source was not in the registry. */
  readonly unknownSourceRecords: number
  readonly disputeFailures: number
}
