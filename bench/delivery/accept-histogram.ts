/**
 * The gateway's own arrival-to-202 histogram (`sgw_ingest_accept_latency_seconds` on
 * /metrics), read before and after a phase: the part of accept-to-receive that is the
 * ingest path (verification, the durable append) rather than delivery. Its buckets are
 * coarse, so quantiles are given as the bucket bound they fall under.
 */

const BUCKET = /^sgw_ingest_accept_latency_seconds_bucket\{le="([^"]+)"\} ([0-9.e+]+)$/gm

export type Buckets = Map<number, number>

export async function acceptBuckets(url: string, adminToken: string): Promise<Buckets> {
  const res = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${adminToken}` } })
  const text = await res.text()
  if (res.status !== 200) throw new Error(`/metrics: ${res.status} ${text.slice(0, 200)}`)
  const buckets: Buckets = new Map()
  for (const m of text.matchAll(BUCKET)) buckets.set(m[1] === '+Inf' ? Infinity : Number(m[1]) * 1000, Number(m[2]))
  return buckets
}

/** Per-phase figures from two readings: the bucket bounds (ms) that p50 and p99 fall under, and the share within `withinMs`. */
export function acceptFigures(before: Buckets, after: Buckets, withinMs: number): { count: number; p50AtMostMs: number; p99AtMostMs: number; shareWithin: number } {
  const bounds = [...after.keys()].sort((a, b) => a - b)
  const cum = bounds.map((b) => (after.get(b) ?? 0) - (before.get(b) ?? 0))
  const count = cum[cum.length - 1] ?? 0
  const at = (q: number) => bounds[cum.findIndex((c) => c >= q * count)] ?? Number.NaN
  const within = cum[bounds.findIndex((b) => b >= withinMs)] ?? 0
  return { count, p50AtMostMs: at(0.5), p99AtMostMs: at(0.99), shareWithin: count === 0 ? Number.NaN : Number((within / count).toFixed(4)) }
}
