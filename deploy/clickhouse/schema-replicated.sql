-- The receipt store's schema on a ClickHouse cluster of one shard and several replicas
-- (ClickHouse Keeper, the `{cluster}`, `{shard}` and `{replica}` macros in each server's
-- configuration): schema.sql with every table replicated and created ON CLUSTER. Apply it
-- once, on any node, before the first process of the service starts:
--
--   clickhouse-client --database receipts --multiquery < deploy/clickhouse/schema-replicated.sql
--
-- The service's own migrations create plain (unreplicated) tables on the node they reach,
-- so on a cluster this file must come first; with its version rows the service finds the
-- schema current and creates nothing. The database `receipts` must exist on every node
-- (CREATE DATABASE IF NOT EXISTS receipts ON CLUSTER '{cluster}'). One shard only: every
-- read folds a receipt's rows with FINAL, which needs them on one server. Replicated
-- tables also drop a retried INSERT of the same block (insert_deduplicate), on top of the
-- recorder's own look-up. Every statement is safe to run again.

CREATE TABLE IF NOT EXISTS schema_migrations ON CLUSTER '{cluster}' (
  version UInt32,
  name String,
  applied_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/schema_migrations', '{replica}') ORDER BY version;

-- One row per receipt, folded from the rows written about it (the recorder's, a scoring,
-- a dispute): SimpleAggregateFunction columns, read with FINAL.
CREATE TABLE IF NOT EXISTS receipts ON CLUSTER '{cluster}' (
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
) ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/{database}/receipts', '{replica}')
PARTITION BY toYYYYMM(emitted_at)
ORDER BY (source_id, test, emitted_at, receipt_id)
SETTINGS index_granularity = 1024, fsync_after_insert = 1, fsync_part_directory = 1;

-- Every recorded receipt's identity and sort key, by receipt_id: what recording and
-- scoring look receipts up in. Filled by the view below in the same INSERT as the receipt.
CREATE TABLE IF NOT EXISTS receipt_ids ON CLUSTER '{cluster}' (
  receipt_id String,
  source_id String,
  test Bool,
  emitted_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/receipt_ids', '{replica}') ORDER BY receipt_id
SETTINGS index_granularity = 256, fsync_after_insert = 1, fsync_part_directory = 1;

CREATE MATERIALIZED VIEW IF NOT EXISTS receipt_ids_recorded ON CLUSTER '{cluster}' TO receipt_ids
AS SELECT receipt_id, source_id, test, emitted_at FROM receipts WHERE signal_id != '';

-- The receipt log's tables (receipt-log/), written by its one sequencer, never changed
-- once written. The creator's signed request of every accepted signal, with its leaf and
-- the salts of its commitments once logged:
CREATE TABLE IF NOT EXISTS signed_requests ON CLUSTER '{cluster}' (
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
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/signed_requests', '{replica}')
ORDER BY (receipt_id, seq)
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- The log's leaves in log order: what the tree is rebuilt from at start.
CREATE TABLE IF NOT EXISTS receipt_log_entries ON CLUSTER '{cluster}' (
  leaf_index UInt64,
  seq UInt64,
  kind LowCardinality(String),
  entry_id String,
  leaf String
) ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{database}/receipt_log_entries', '{replica}')
ORDER BY leaf_index
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- Every checkpoint signed, persisted before it is published; the first row of a size is
-- that size's checkpoint for good.
CREATE TABLE IF NOT EXISTS receipt_log_checkpoints ON CLUSTER '{cluster}' (
  size UInt64,
  root String,
  note String,
  key_ids Array(String),
  created_at DateTime64(3, 'UTC')
) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{database}/receipt_log_checkpoints', '{replica}')
ORDER BY (size, created_at)
SETTINGS fsync_after_insert = 1, fsync_part_directory = 1;

-- The versions this schema is at, on one node (replication carries them to the others;
-- running this again adds rows that fold into these).
INSERT INTO schema_migrations (version, name, applied_at) VALUES
  (1, 'receipts', now64(3)),
  (2, 'receipt lookups', now64(3)),
  (3, 'fsync_inserted_parts', now64(3)),
  (4, 'receipt_log', now64(3));
