import type { ClickHouseClient } from '@clickhouse/client'
import type { Migration } from '../schema-migrations.js'

/** Rows per granule of the receipts table: what a read of one source's newest page costs at least. */
export const RECEIPTS_INDEX_GRANULARITY = 1024

/**
 * Two changes for read and record speed at millions of receipts (figures in the benchmark
 * documentation):
 *
 * - The receipts table is rebuilt with granules of 1,024 rows instead of ClickHouse's 8,192.
 *   A source holds a few hundred rows per part, so a page of one source read eight times
 *   the rows it needed from every part; with 1,024 it reads about what it needs. The
 *   granule size cannot be changed in place: the rows are copied into a new table that then
 *   takes the old one's name (EXCHANGE, atomic), and the old one is dropped. Copying again
 *   after an interruption is harmless: every column folds with max/min, so a row written
 *   twice folds into itself.
 * - `receipt_ids`: every recorded receipt's identity and sort key, ordered by receipt_id,
 *   kept by a materialized view in the same INSERT as the receipt. Recording asks it which
 *   of a batch's ids exist (a look-up by primary key, a few granules per id, instead of a
 *   bloom-filter scan over every granule of every source in the batch), and a scorer's
 *   post finds each receipt's sort key there. Rows only about a scoring or a dispute
 *   (signal_id empty) are not receipts and are not listed. Filled from what is stored
 *   after the view exists, so nothing recorded meanwhile is missed; a receipt listed twice
 *   (the fill run again after an interruption) is harmless to a look-up, and
 *   ReplacingMergeTree folds it.
 */
const RECEIPTS_COLUMNS = `source_id String,
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
      INDEX receipt_id_bloom receipt_id TYPE bloom_filter(0.001) GRANULARITY 1`

async function rows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  return (await client.query({ query, format: 'JSONEachRow' })).json<T>()
}

async function rebuildWithSmallGranules(client: ClickHouseClient): Promise<void> {
  const [current] = await rows<{ engine_full: string }>(client, `SELECT engine_full FROM system.tables WHERE database = currentDatabase() AND name = 'receipts'`)
  if (current !== undefined && !current.engine_full.includes(`index_granularity = ${RECEIPTS_INDEX_GRANULARITY}`)) {
    await client.command({
      query: `CREATE TABLE IF NOT EXISTS receipts_rebuilt (${RECEIPTS_COLUMNS})
        ENGINE = AggregatingMergeTree PARTITION BY toYYYYMM(emitted_at) ORDER BY (source_id, test, emitted_at, receipt_id)
        SETTINGS index_granularity = ${RECEIPTS_INDEX_GRANULARITY}`,
    })
    await client.command({ query: 'TRUNCATE TABLE receipts_rebuilt' })
    await client.command({ query: 'INSERT INTO receipts_rebuilt SELECT * FROM receipts' })
    await client.command({ query: 'EXCHANGE TABLES receipts AND receipts_rebuilt' })
  }
  await client.command({ query: 'DROP TABLE IF EXISTS receipts_rebuilt SYNC' })
}

export const receiptLookups: Migration = {
  version: 2,
  name: 'receipt lookups',
  statements: [],
  async apply(client) {
    await rebuildWithSmallGranules(client)
    await client.command({
      query: `CREATE TABLE IF NOT EXISTS receipt_ids (
        receipt_id String,
        source_id String,
        test Bool,
        emitted_at DateTime64(3, 'UTC')
      ) ENGINE = ReplacingMergeTree ORDER BY receipt_id SETTINGS index_granularity = 256`,
    })
    await client.command({
      query: `CREATE MATERIALIZED VIEW IF NOT EXISTS receipt_ids_recorded TO receipt_ids
        AS SELECT receipt_id, source_id, test, emitted_at FROM receipts WHERE signal_id != ''`,
    })
    // Run again after an interruption, this lists receipts twice: harmless (see above).
    await client.command({ query: `INSERT INTO receipt_ids SELECT receipt_id, source_id, test, emitted_at FROM receipts WHERE signal_id != ''` })
  },
}
