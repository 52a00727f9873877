import type { ClickHouseConnection } from './clickhouse-connection.js'
import { toStoreError } from './clickhouse-errors.js'

/**
 * Every row of the receipts table copied as stored, for moving a deployment's receipts to
 * another store (the embedded engine's folder into a cluster's recorder folder or a
 * ClickHouse server). Rows go as they are, not folded: a receipt's row, its scorings' and
 * its disputes' rows fold in the other store as they did here (every column is a max or a
 * min), so a receipt keeps its recorded_at, its outcome and its dispute status, and rows
 * loaded twice (a copy run again after an interruption) fold into themselves. The
 * look-up of recorded ids is filled by its materialized view in the same insert.
 */

/** The rows as NDJSON (ISO 8601 instants, tuples as objects), pulled chunk by chunk. */
export function storedRows(conn: ClickHouseConnection): AsyncIterable<Uint8Array> {
  return conn.stream('SELECT * FROM receipts', {}, 'JSONEachRow')
}

/** Writes rows read by `storedRows` (parsed); resolves once the store confirmed them. */
export async function loadRows(conn: ClickHouseConnection, rows: readonly Record<string, unknown>[]): Promise<void> {
  if (rows.length === 0) return
  try {
    await conn.client.insert({
      table: 'receipts',
      values: rows as Record<string, unknown>[],
      format: 'JSONEachRow',
      // The instants come as ISO 8601 with a zone ('2026-01-02T03:04:05.678Z'), which the basic parser refuses.
      clickhouse_settings: { date_time_input_format: 'best_effort' },
    })
  } catch (err) {
    throw toStoreError('loading receipts', err)
  }
}

/** Receipts held (rows about a scoring or a dispute of a receipt never recorded are none). */
export async function receiptCount(conn: ClickHouseConnection): Promise<number> {
  try {
    const rows = await (await conn.client.query({ query: `SELECT count() AS n FROM receipts FINAL WHERE signal_id != ''`, format: 'JSONEachRow' })).json<{ n: number | string }>()
    return Number(rows[0]?.n ?? 0)
  } catch (err) {
    throw toStoreError('counting receipts', err)
  }
}
