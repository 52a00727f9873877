/**
 * Why moving an embedded deployment into a cluster stopped, as a stable code. A refusal
 * (`refused`) changed nothing, in the data folder or in the cluster; a failure part-way
 * left the cluster partly written, and `--resume` finishes it.
 */
export type MigrationErrorCode =
  /** The embedded gateway still runs on DATA_DIR (it holds the folder's lock), or a recorder runs on the target folder. */
  | 'data_dir_locked'
  /** The embedded recorder has not recorded every signal of the journal. */
  | 'recorder_behind'
  /** The embedded receipt log's sequencer has not logged every record of the journal. */
  | 'receipt_log_behind'
  /** The cluster's PUBLIC_BASE_URL names the receipt log otherwise than the embedded deployment's checkpoints do. */
  | 'log_origin_differs'
  /** The cluster already holds state: a bucket with entries, a signal stream with records, receipts, or receipt log leaves. */
  | 'cluster_not_empty'
  /** `--resume` on a data folder with no move under way, or a move begun without it while one is. */
  | 'no_move_to_resume'
  /** `--resume` found an entry of the cluster that differs from the one being copied. */
  | 'entry_differs'
  /** The data folder holds a bucket this release does not know how to move. */
  | 'unknown_bucket'
  /** Options or environment that cannot work (no NATS_URL, no recorder folder without CLICKHOUSE_URL). */
  | 'invalid_options'
  /** The receipts could not be read or written. */
  | 'receipts_failed'

const REFUSALS: ReadonlySet<MigrationErrorCode> = new Set(['data_dir_locked', 'recorder_behind', 'receipt_log_behind', 'log_origin_differs', 'cluster_not_empty', 'no_move_to_resume', 'unknown_bucket', 'invalid_options'])

export class MigrationError extends Error {
  readonly code: MigrationErrorCode
  /** True when nothing was written: the command can be run again as it is once the cause is gone. */
  readonly refused: boolean

  constructor(code: MigrationErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'MigrationError'
    this.code = code
    this.refused = REFUSALS.has(code)
  }
}
