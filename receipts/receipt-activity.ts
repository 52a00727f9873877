import type { ClickHouseClient } from '@clickhouse/client'
import { toStoreError } from './clickhouse-errors.js'
import { OUTCOMES, type Outcome } from './receipt.js'
import { OUTCOME_OF_SCORING } from './receipt-stats.js'
import { ReceiptStoreError } from './receipt-store-error.js'

/** The bucket sizes a source's activity is counted in. */
export const ACTIVITY_BUCKET_MS = { minute: 60_000, hour: 3_600_000 } as const
export type ActivityBucket = keyof typeof ACTIVITY_BUCKET_MS

/**
 * The most buckets one answer holds (a day of minutes, two months of hours): the answer's
 * size and the query's grouping are bounded by it whatever window a caller asks for.
 */
export const ACTIVITY_MAX_BUCKETS = 1440

/**
 * Rows of (bucket, severity, outcome) one query may return. A manifest names at most 16
 * severities, but a source's history may hold more after its manifest changed; this
 * bounds the memory of one answer all the same (1,440 buckets × 4 outcomes × 32 severities).
 */
const MAX_ROWS = ACTIVITY_MAX_BUCKETS * OUTCOMES.length * 32

/** The window of a count: [fromMs, toMs), both multiples of the bucket's size. */
export interface ActivityWindow {
  readonly fromMs: number
  readonly toMs: number
  readonly bucket: ActivityBucket
}

/** One bucket's counts: every receipt once by its severity and once by its outcome. */
export interface ActivityCounts {
  /** The bucket's start, ms since the epoch (UTC). */
  readonly startMs: number
  readonly total: number
  readonly bySeverity: Readonly<Record<string, number>>
  readonly byOutcome: Readonly<Record<Outcome, number>>
}

/**
 * A source's non-test receipts counted per bucket of `emitted_at` (the signal's own time,
 * the axis the receipt filters and the table's sorting key use, so the query reads the
 * source's range of the key only). Receipts fold with FINAL (one count per receipt, with
 * its newest outcome); rows of a dispute about a receipt never recorded are left out.
 */
const ACTIVITY_QUERY = `SELECT start_ms, severity, outcome, count() AS n
  FROM (
    SELECT intDiv(toUnixTimestamp64Milli(emitted_at), {bucket_ms:Int64}) * {bucket_ms:Int64} AS start_ms,
      severity,
      ${OUTCOME_OF_SCORING} AS outcome
    FROM receipts FINAL
    WHERE source_id = {source_id:String} AND test = false AND signal_id != ''
      AND emitted_at >= fromUnixTimestamp64Milli({from_ms:Int64}, 'UTC')
      AND emitted_at < fromUnixTimestamp64Milli({to_ms:Int64}, 'UTC')
  )
  GROUP BY start_ms, severity, outcome
  ORDER BY start_ms
  LIMIT ${MAX_ROWS}`

interface ActivityRow {
  start_ms: number | string
  severity: string
  outcome: string
  n: number | string
}

/** Every bucket of the window, oldest first, empty ones included (a chart's x axis needs them). */
export async function readSourceActivity(client: ClickHouseClient, sourceId: string, window: ActivityWindow): Promise<ActivityCounts[]> {
  const bucketMs = ACTIVITY_BUCKET_MS[window.bucket]
  const { fromMs, toMs } = window
  if (bucketMs === undefined) throw new ReceiptStoreError('invalid_argument', 'the bucket must be minute or hour')
  for (const v of [fromMs, toMs]) {
    if (!Number.isSafeInteger(v) || v < 0 || v % bucketMs !== 0) throw new ReceiptStoreError('invalid_argument', `the window's ends must be instants in milliseconds since the epoch, on ${window.bucket} boundaries`)
  }
  if (toMs <= fromMs || (toMs - fromMs) / bucketMs > ACTIVITY_MAX_BUCKETS) throw new ReceiptStoreError('invalid_argument', `the window must hold 1 to ${ACTIVITY_MAX_BUCKETS} buckets`)
  let rows: ActivityRow[]
  try {
    const result = await client.query({ query: ACTIVITY_QUERY, query_params: { source_id: sourceId, bucket_ms: bucketMs, from_ms: fromMs, to_ms: toMs }, format: 'JSONEachRow' })
    rows = await result.json<ActivityRow>()
  } catch (err) {
    throw toStoreError('reading source activity', err)
  }
  const buckets = Array.from({ length: (toMs - fromMs) / bucketMs }, (_, i) => ({
    startMs: fromMs + i * bucketMs,
    total: 0,
    bySeverity: {} as Record<string, number>,
    byOutcome: Object.fromEntries(OUTCOMES.map((o) => [o, 0])) as Record<Outcome, number>,
  }))
  for (const row of rows) {
    const bucket = buckets[(Number(row.start_ms) - fromMs) / bucketMs]
    if (bucket === undefined) continue
    const n = Number(row.n)
    bucket.total += n
    bucket.bySeverity[row.severity] = (bucket.bySeverity[row.severity] ?? 0) + n
    const outcome = (OUTCOMES as readonly string[]).includes(row.outcome) ? (row.outcome as Outcome) : 'pending'
    bucket.byOutcome[outcome] += n
  }
  return buckets
}
