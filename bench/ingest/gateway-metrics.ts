import type { LaunchedGateway } from '../../harness/gateway-launcher.js'

/**
 * The gateway's own accept-latency histogram (`GET /metrics`), read before and after a
 * phase. It separates time spent inside the gateway from time in the kernel, the
 * scheduler and the load generator, which the client-side latency includes.
 */
/** Cumulative buckets as [upper bound in milliseconds, count]. */
export type Buckets = ReadonlyArray<readonly [number, number]>

export async function acceptLatencyBuckets(gw: Pick<LaunchedGateway, 'url' | 'adminToken'>): Promise<Buckets> {
  const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  const text = await res.text()
  const out: Array<[number, number]> = []
  // Bounds are in seconds on the page; rounded to the microsecond so 0.003 s reads 3 ms, not 3.0000000000000004.
  for (const m of text.matchAll(/^sgw_ingest_accept_latency_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)) {
    out.push([m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Math.round(Number(m[1]) * 1e6) / 1e3, Number(m[2])])
  }
  return out
}

/** The smallest bucket bound holding fraction `q` of the accepts between two readings. */
export function bucketQuantile(before: Buckets, after: Buckets, q: number): number {
  const total = (after[after.length - 1]?.[1] ?? 0) - (before[before.length - 1]?.[1] ?? 0)
  if (total <= 0) return Number.NaN
  for (let i = 0; i < after.length; i++) {
    const [le, count] = after[i] as readonly [number, number]
    if (count - (before[i]?.[1] ?? 0) >= q * total) return le
  }
  return Number.POSITIVE_INFINITY
}
