-- The receipt store's schema on one ClickHouse server: what the service's migrations
-- (receipts/migrations/) create, at schema version 4, written out for an operator to
-- review and apply before the first process starts:
--
--   clickhouse-client --database receipts --multiquery < deploy/clickhouse/schema.sql
--
-- Applied or not, the service migrates the store itself when it starts (one process at a
-- time); with the version rows at the end it finds the schema current and changes nothing.
-- Every statement is safe to run again.

CREATE TABLE IF NOT EXISTS schema_migrations (
  version UInt32,
  name String,
  applied_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree ORDER BY version;

-- One row per receipt, folded from the rows written about it (the recorder's, a scoring,
-- a dispute): SimpleAggregateFunction columns, read with FINAL.
CREATE TABLE IF NOT EXISTS receipts (
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
) ENGINE = AggregatingMergeTree
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (source_id, test, emitted_at, receipt_id)
SETTINGS index_granularity = 1024, fsync_after_insert = 1, fsync_part_directory = 1;

-- Every recorded receipt's identity and sort key, by receipt_id: what recording and
-- scoring look receipts up in. Filled by the view below in the same INSERT as the receipt.
CREATE TABLE IF NOT EXISTS receipt_ids (
  receipt_id String,
  source_id String,
  test Bool,
  emitted_at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree ORDER BY receipt_id
SETTINGS index_granularity = 256, fsync_after_insert = 1, fsync_part_directory = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS receipt_ids_recorded TO receipt_ids
AS SELECT receipt_id, source_id, test, emitted_at FROM receipts WHERE signal_id != '';

-- The receipt log's tables (receipt-log/), written by its one sequencer, never changed
-- once written. The creator's signed request of every accepted signal, with its leaf and
-- the salts of its commitments once logged:
CREATE TABLE IF NOT EXISTS signed_requests (
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
) ENGINE = MergeTree
ORDER BY (receipt_id, seq)
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- The log's leaves in log order: what the tree is rebuilt from at start.
CREATE TABLE IF NOT EXISTS receipt_log_entries (
  leaf_index UInt64,
  seq UInt64,
  kind LowCardinality(String),
  entry_id String,
  leaf String
) ENGINE = ReplacingMergeTree
ORDER BY leaf_index
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- Every checkpoint signed, persisted before it is published; the first row of a size is
-- that size's checkpoint for good.
CREATE TABLE IF NOT EXISTS receipt_log_checkpoints (
  size UInt64,
  root String,
  note String,
  key_ids Array(String),
  created_at DateTime64(3, 'UTC')
) ENGINE = MergeTree
ORDER BY (size, created_at)
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- The versions this schema is at (ReplacingMergeTree on version: running this again adds
-- rows that fold into these).
INSERT INTO schema_migrations (version, name, applied_at) VALUES
  (1, 'receipts', now64(3)),
  (2, 'receipt lookups', now64(3)),
  (3, 'fsync_inserted_parts', now64(3)),
  (4, 'receipt_log', now64(3));
