import type { Migration } from '../schema-migrations.js'

/**
 * One row per receipt, folded by ClickHouse from the rows written about it: the recorder's
 * (every receipt field), a scorer's (the outcome tuple) and a dispute's (the dispute
 * tuple). The sorting key is the receipt's identity and its place in the list order, so
 * rows about one receipt always meet in one part and one partition.
 *
 * Every other column is a SimpleAggregateFunction, folded with max (min for recorded_at):
 * - the receipt's own fields are written once, by the recorder; the other rows leave them
 *   at their defaults ('' or 0 or NULL), which max() never prefers;
 * - the outcome tuple starts with (scored_at, posted_at): max() keeps the newest scoring,
 *   and of two with the same scored_at the later post;
 * - the dispute tuple starts with a rank (open 1, a resolution 2) and changed_at: a
 *   resolution outranks the opening whatever order they arrive in.
 * No row is ever read, changed and written back, so a scoring and a dispute resolution
 * landing at once cannot undo each other (a ReplacingMergeTree of whole rows could).
 * Reads fold with FINAL, so no read ever sees a receipt twice or half of one.
 */
export const receiptsTable: Migration = {
  version: 1,
  name: 'receipts',
  statements: [
    `CREATE TABLE IF NOT EXISTS receipts (
      source_id String,
      test Bool,
      emitted_at DateTime64(3, 'UTC'),
      receipt_id String,
      agent_id SimpleAggregateFunction(max, String),
      signal_id SimpleAggregateFunction(max, String),
      key_id SimpleAggregateFunction(max, String),
      token SimpleAggregateFunction(max, String),
      severity SimpleAggregateFunction(max, String),
      confidence SimpleAggregateFunction(max, Nullable(UInt8)),
      note SimpleAggregateFunction(max, Nullable(String)),
      received_at SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
      recorded_at SimpleAggregateFunction(min, Nullable(DateTime64(3, 'UTC'))),
      scoring SimpleAggregateFunction(max, Tuple(scored_at DateTime64(3, 'UTC'), posted_at DateTime64(3, 'UTC'), window_start DateTime64(3, 'UTC'), window_end DateTime64(3, 'UTC'), baseline Float64, outcome String)),
      dispute SimpleAggregateFunction(max, Tuple(rank UInt8, changed_at DateTime64(3, 'UTC'), status String)),
      INDEX receipt_id_bloom receipt_id TYPE bloom_filter(0.001) GRANULARITY 1
    )
    ENGINE = AggregatingMergeTree
    PARTITION BY toYYYYMM(emitted_at)
    ORDER BY (source_id, test, emitted_at, receipt_id)`,
  ],
}
