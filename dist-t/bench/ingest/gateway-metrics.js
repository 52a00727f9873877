export async function acceptLatencyBuckets(gw) {
    const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } });
    const text = await res.text();
    const out = [];
    for (const m of text.matchAll(/^sgw_ingest_accept_latency_ms_bucket\{le="([^"]+)"\} (\d+)$/gm)) {
        out.push([m[1] === '+Inf' ? Number.POSITIVE_INFINITY : Number(m[1]), Number(m[2])]);
    }
    return out;
}
/** The smallest bucket bound holding fraction `q` of the accepts between two readings. */
export function bucketQuantile(before, after, q) {
    const total = (after[after.length - 1]?.[1] ?? 0) - (before[before.length - 1]?.[1] ?? 0);
    if (total <= 0)
        return Number.NaN;
    for (let i = 0; i < after.length; i++) {
        const [le, count] = after[i];
        if (count - (before[i]?.[1] ?? 0) >= q * total)
            return le;
    }
    return Number.POSITIVE_INFINITY;
}
//# sourceMappingURL=gateway-metrics.js.map