import type { ClickHouseClient } from '@clickhouse/client'
import { toStoreError } from './clickhouse-errors.js'
import type { SourceStats } from './receipt.js'
import { ReceiptStoreError } from './receipt-store-error.js'

/**
 * A folded receipt's outcome: the newest scoring's, or `pending` while no scorer posted one
 * (an unscored receipt's tuple is all defaults, its scored_at the epoch).
 */
export const OUTCOME_OF_SCORING = "if(toUnixTimestamp64Milli(tupleElement(scoring, 1)) != 0, tupleElement(scoring, 6), 'pending')"

/**
 * One source's figures in one statement: its receipts folded with FINAL (so a receipt
 * counts once, with the outcome its newest scoring gave it), test receipts left out, the
 * rows of a dispute about a receipt not yet recorded left out (signal_id is empty there).
 * It reads the source's own range of the sorting key only; the caller caches the answer.
 * The source id and the instants are typed parameters, never spliced into the text.
 */
const STATS_QUERY = `SELECT
    count() AS total,
    countIf(outcome = 'pending') AS pending,
    countIf(outcome = 'hit') AS hit,
    countIf(outcome = 'miss') AS miss,
    countIf(outcome = 'void') AS void,
    toUnixTimestamp64Milli(max(received)) AS last_ms,
    uniqExactIf(toStartOfHour(received), received >= fromUnixTimestamp64Milli({from_ms:Int64}, 'UTC') AND received < fromUnixTimestamp64Milli({to_ms:Int64}, 'UTC')) AS hours
  FROM (
    SELECT received_at AS received,
      ${OUTCOME_OF_SCORING} AS outcome
    FROM receipts FINAL
    WHERE source_id = {source_id:String} AND test = false AND signal_id != ''
  )`

interface StatsRow {
  total: number | string
  pending: number | string
  hit: number | string
  miss: number | string
  void: number | string
  last_ms: number | string
  hours: number | string
}

/** The figures of `sourceId`'s receipts; hours are counted within [fromMs, toMs). */
export async function readSourceStats(client: ClickHouseClient, sourceId: string, hours: { readonly fromMs: number; readonly toMs: number }): Promise<SourceStats> {
  for (const v of [hours.fromMs, hours.toMs]) {
    if (!Number.isSafeInteger(v) || v < 0) throw new ReceiptStoreError('invalid_argument', 'the span of hours must be instants in milliseconds since the epoch')
  }
  let rows: StatsRow[]
  try {
    const result = await client.query({ query: STATS_QUERY, query_params: { source_id: sourceId, from_ms: hours.fromMs, to_ms: hours.toMs }, format: 'JSONEachRow' })
    rows = await result.json<StatsRow>()
  } catch (err) {
    throw toStoreError('reading source figures', err)
  }
  const row = rows[0]
  const n = (v: number | string | undefined) => Number(v ?? 0)
  const total = n(row?.total)
  return {
    outcomes: { pending: n(row?.pending), hit: n(row?.hit), miss: n(row?.miss), void: n(row?.void) },
    // max() of no rows is the epoch: no receipt, no last signal.
    lastReceivedMs: total === 0 ? null : n(row?.last_ms),
    hoursWithSignals: n(row?.hours),
  }
}
