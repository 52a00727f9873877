import type { Migration } from '../schema-migrations.js'

/**
 * Inserted parts are synced to disk before the insert is confirmed. The recorder
 * acknowledges its log position, durably, once an insert is confirmed; ClickHouse's
 * default (no fsync after an insert) would let a power cut keep the position and lose the
 * part, leaving receipts missing with nothing to say so. A recorder batch is one part of
 * up to RECORDER_BATCH rows, so the cost is one sync per batch. Both tables written by an
 * insert carry the settings: the receipts and the receipt_ids look-up its view fills.
 */
export const fsyncInserts: Migration = {
  version: 3,
  name: 'fsync_inserted_parts',
  statements: [
    'ALTER TABLE receipts MODIFY SETTING fsync_after_insert = 1, fsync_part_directory = 1',
    'ALTER TABLE receipt_ids MODIFY SETTING fsync_after_insert = 1, fsync_part_directory = 1',
  ],
}
