import { toStoreError, type ClickHouseConnection } from '../receipts/index.js'

/**
 * The receipt log's tables copied as stored, for moving a deployment into another store
 * (migrate/): the same leaves at the same indexes, the same signed requests with their
 * salts, and the same checkpoints with the instants they were signed at, so the store
 * moved into rebuilds the same tree, its latest checkpoint is the one last published, and
 * its sequencer signs on from it.
 *
 * Loading is idempotent (a move run again after an interruption): a row whose key the
 * store already holds is not written again. The keys: a leaf's index; a signed request's
 * receipt, seq, leaf and salts (a sequencer killed between its inserts wrote a receipt's
 * row again with other salts: both rows are kept, as they were); a checkpoint's size and
 * signed note.
 */
export const LOG_TABLES = {
  receipt_log_entries: { key: ['leaf_index'], lookup: 'leaf_index', lookupType: 'UInt64' },
  signed_requests: { key: ['receipt_id', 'seq', 'leaf', 'salts'], lookup: 'receipt_id', lookupType: 'String' },
  receipt_log_checkpoints: { key: ['size', 'note'], lookup: 'size', lookupType: 'UInt64' },
} as const

export type LogTable = keyof typeof LOG_TABLES

/** Every row of `table` as NDJSON (ISO 8601 instants, 64-bit integers unquoted), pulled chunk by chunk. */
export function storedLogRows(conn: ClickHouseConnection, table: LogTable): AsyncIterable<Uint8Array> {
  return conn.stream(`SELECT * FROM ${table}`, {}, 'JSONEachRow')
}

const keyOf = (table: LogTable, row: Record<string, unknown>) => JSON.stringify(LOG_TABLES[table].key.map((c) => String(row[c])))

/** Writes the rows of `rows` (parsed `storedLogRows` lines) the store does not hold yet; resolves with how many it wrote. */
export async function loadLogRows(conn: ClickHouseConnection, table: LogTable, rows: readonly Record<string, unknown>[]): Promise<number> {
  if (rows.length === 0) return 0
  const { key, lookup, lookupType } = LOG_TABLES[table]
  try {
    const held = await (
      await conn.client.query({
        query: `SELECT ${key.join(', ')} FROM ${table} WHERE ${lookup} IN {keys:Array(${lookupType})}`,
        query_params: { keys: [...new Set(rows.map((r) => r[lookup]))] },
        format: 'JSONEachRow',
      })
    ).json<Record<string, unknown>>()
    const present = new Set(held.map((r) => keyOf(table, r)))
    const fresh = rows.filter((r) => !present.has(keyOf(table, r)))
    if (fresh.length === 0) return 0
    await conn.client.insert({
      table,
      values: fresh as Record<string, unknown>[],
      format: 'JSONEachRow',
      // The instants come as ISO 8601 with a zone, which the basic parser refuses.
      clickhouse_settings: { date_time_input_format: 'best_effort' },
    })
    return fresh.length
  } catch (err) {
    throw toStoreError(`loading ${table}`, err)
  }
}

/** The leaves the store holds (the tree's size once rebuilt). */
export async function logLeafCount(conn: ClickHouseConnection): Promise<number> {
  try {
    const rows = await (await conn.client.query({ query: 'SELECT count() AS n FROM receipt_log_entries FINAL', format: 'JSONEachRow' })).json<{ n: number | string }>()
    return Number(rows[0]?.n ?? 0)
  } catch (err) {
    throw toStoreError('counting receipt log leaves', err)
  }
}
