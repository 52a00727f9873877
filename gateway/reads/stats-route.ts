import { ACTIVITY_BUCKET_MS, ACTIVITY_MAX_BUCKETS, type ActivityBucket, type ActivityCounts, type ReceiptStore } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { param, parseQuery, withDefault } from '../http/query.js'
import type { ReceiptAccess } from './receipt-access.js'
import { readRoute, type ReadRouteParts } from './read-route.js'

export const STATS_PATH = '/v1/byo/sources/:source_id/stats'

/** The window when `from` is left out: the last hour of minutes, the last day of hours. */
export const STATS_DEFAULT_BUCKETS: Readonly<Record<ActivityBucket, number>> = { minute: 60, hour: 24 }

const STATS_PARAMS = {
  bucket: withDefault(param.oneOf(Object.keys(ACTIVITY_BUCKET_MS) as ActivityBucket[]), 'minute' as ActivityBucket),
  from: param.instant,
  to: param.instant,
}

/**
 * The window a query asks for, on the bucket's boundaries: `to` (now when left out) rounded
 * up, so the bucket under way is counted; `from` rounded down. A window over
 * ACTIVITY_MAX_BUCKETS is refused rather than cut, so a chart never shows less than it
 * asked for without saying so.
 */
export function statsWindow(query: URLSearchParams, nowMs: number): { fromMs: number; toMs: number; bucket: ActivityBucket } {
  const q = parseQuery(query, STATS_PARAMS)
  const size = ACTIVITY_BUCKET_MS[q.bucket]
  const toMs = Math.ceil((q.to ?? nowMs) / size) * size
  const fromMs = q.from === undefined ? toMs - STATS_DEFAULT_BUCKETS[q.bucket] * size : Math.floor(q.from / size) * size
  if (q.from !== undefined && q.to !== undefined && q.to <= q.from) throw new ApiError('invalid_request', 'to must be after from')
  if (toMs <= fromMs) throw new ApiError('invalid_request', 'from must be before to (now when to is left out)')
  const buckets = (toMs - fromMs) / size
  if (buckets > ACTIVITY_MAX_BUCKETS) throw new ApiError('invalid_request', `the window holds ${buckets} ${q.bucket} buckets, at most ${ACTIVITY_MAX_BUCKETS}: narrow from and to, or ask for bucket=hour`)
  return { fromMs, toMs, bucket: q.bucket }
}

const iso = (ms: number) => new Date(ms).toISOString()

/** The answer's shape: ISO times and snake_case names, as every read of the API. */
function bucketView(b: ActivityCounts) {
  return { start: iso(b.startMs), total: b.total, severity: b.bySeverity, outcome: b.byOutcome }
}

function totalsOf(buckets: readonly ActivityCounts[]) {
  const severity: Record<string, number> = {}
  const outcome: Record<string, number> = {}
  let total = 0
  for (const b of buckets) {
    total += b.total
    for (const [k, n] of Object.entries(b.bySeverity)) severity[k] = (severity[k] ?? 0) + n
    for (const [k, n] of Object.entries(b.byOutcome)) outcome[k] = (outcome[k] ?? 0) + n
  }
  return { total, severity, outcome }
}

/**
 * `GET /v1/byo/sources/:source_id/stats`: a source's receipts counted per minute or hour by
 * severity and by outcome. Read by the rules and allowances of the source's receipt list
 * (receipt-access.ts): its creator, the admin and a renter with an active rental count
 * everything; anyone else counts a source that lists its receipts publicly, only up to its
 * public delay's cutoff (the buckets after it are left out), so the counts reveal no
 * receipt the public list hides. Test receipts are never counted.
 */
export function registerStatsRoute(r: ReadRouteParts, store: ReceiptStore, access: ReceiptAccess, now: () => number = Date.now): void {
  readRoute(r, STATS_PATH, async ({ reply, reader, params, query, admit }) => {
    const window = statsWindow(query, now())
    const seen = access.source(reader, params[0] as string)
    // The allowance is taken before a 404, so unknown ids cannot be probed for free.
    await admit(seen?.rental?.rental_id)
    if (seen === undefined) throw new ApiError('not_found', 'no such source')
    const size = ACTIVITY_BUCKET_MS[window.bucket]
    const toMs = seen.view === 'public' ? Math.min(window.toMs, Math.floor((seen.cutoffMs as number) / size) * size) : window.toMs
    const buckets = toMs <= window.fromMs ? [] : await store.sourceActivity(seen.source.source_id, { ...window, toMs })
    reply.send(200, {
      ok: true,
      data: { source_id: seen.source.source_id, bucket: window.bucket, from: iso(window.fromMs), to: iso(toMs > window.fromMs ? toMs : window.fromMs), totals: totalsOf(buckets), buckets: buckets.map(bucketView) },
    })
  })
}
