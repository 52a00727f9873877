import type { Migration } from '../schema-migrations.js'

/**
 * The receipt log's tables (receipt-log/). Written by its one sequencer, read by every
 * process that serves the log, never changed once written:
 *
 * - `signed_requests`: the creator's signed request of every accepted signal (test ones
 *   included), kept as long as the receipt: method, path, timestamp and nonce (the signing
 *   string's parts), the exact body, the key id, the public key (a revoked key's record
 *   leaves the registry in time; its bytes stay here) and the signature. A logged signal's
 *   row also holds its leaf index, its leaf and the salts of its commitments. A sequencer
 *   killed between this insert and the entries' one writes its rows again with other salts;
 *   a reader takes the row whose leaf is the one logged at its index.
 * - `receipt_log_entries`: the leaves in log order, what the tree is rebuilt from at start
 *   and what entry bundles are cut from.
 * - `receipt_log_checkpoints`: every checkpoint signed, persisted before it is published;
 *   the first row of a size is that size's checkpoint for good.
 *
 * All sync parts to disk before an insert is confirmed: a checkpoint published over leaves
 * a power cut could take back would make the next checkpoint inconsistent with it.
 */
const FSYNC = 'SETTINGS fsync_after_insert = 1, fsync_part_directory = 1'

export const receiptLogTables: Migration = {
  version: 4,
  name: 'receipt_log',
  statements: [
    `CREATE TABLE IF NOT EXISTS signed_requests (
      receipt_id String,
      seq UInt64,
      source_id String,
      test Bool,
      method String,
      path String,
      timestamp String,
      nonce String,
      body String,
      key_id String,
      public_key String,
      signature String,
      leaf_index Nullable(UInt64),
      leaf String,
      salts String
    )
    ENGINE = MergeTree
    ORDER BY (receipt_id, seq)
    ${FSYNC}`,
    `CREATE TABLE IF NOT EXISTS receipt_log_entries (
      leaf_index UInt64,
      seq UInt64,
      kind LowCardinality(String),
      entry_id String,
      leaf String
    )
    ENGINE = ReplacingMergeTree
    ORDER BY leaf_index
    ${FSYNC}`,
    `CREATE TABLE IF NOT EXISTS receipt_log_checkpoints (
      size UInt64,
      root String,
      note String,
      key_ids Array(String),
      created_at DateTime64(3, 'UTC')
    )
    ENGINE = MergeTree
    ORDER BY (size, created_at)
    ${FSYNC}`,
  ],
}
