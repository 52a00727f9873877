import { closedSpec, CONNECTIONS, GATEWAY_ENV, peakBudgetRate, SWEEP, SWEEP_MS, WARM_UP_BUDGET_PER_CEILING } from './options.js';
import { formatMs, formatRate } from './report.js';
import { ceiling, print, withSession } from './session.js';
/**
 * `--sweep`: the peak phase alone, on a fresh gateway per VERIFY_THREADS ×
 * VERIFY_BATCH, to choose the defaults. A fresh gateway each time, because the
 * gateway's memory and GC cost grow with every accepted signal (dedup and nonce
 * state), which would handicap the later settings.
 */
export async function sweepRun(ceilingBefore) {
    const rows = [];
    for (const threads of SWEEP.threads) {
        for (const batch of SWEEP.batch) {
            print();
            print(`--- VERIFY_THREADS=${threads} VERIFY_BATCH=${batch}`);
            const env = { ...GATEWAY_ENV, VERIFY_THREADS: String(threads), VERIFY_BATCH: String(batch) };
            const row = await withSession(env, async (s) => {
                const warm = await s.phase(closedSpec('warm-up', CONNECTIONS, SWEEP_MS.warmUp, ceilingBefore * WARM_UP_BUDGET_PER_CEILING));
                const peak = await s.phase(closedSpec('peak', CONNECTIONS, SWEEP_MS.peak, peakBudgetRate(warm, ceilingBefore)));
                return { threads, batch, peak, rssMb: s.sampler.peakMb };
            });
            rows.push(row);
        }
    }
    print();
    const ceilingAfter = await ceiling('after');
    const verifyCeiling = Math.max(ceilingBefore, ceilingAfter);
    print();
    print(`sweep (${CONNECTIONS} connections, closed loop, ${SWEEP_MS.peak / 1000} s each; ceiling ${formatRate(verifyCeiling)}/s):`);
    print('  threads  batch  accepted/s  ratio   p50 ms  p99 ms  main+other cores  peak RSS MB');
    for (const r of rows) {
        const u = r.peak.usage;
        print(`  ${String(r.threads).padStart(7)}  ${String(r.batch).padStart(5)}  ${formatRate(r.peak.acceptedPerS).padStart(10)}  ${(r.peak.acceptedPerS / verifyCeiling).toFixed(3)}  ${formatMs(r.peak.p50).padStart(6)}  ${formatMs(r.peak.p99).padStart(6)}  ${u.mainCores.toFixed(2)}+${u.otherCores.toFixed(2)}`.padEnd(84) +
            `${r.rssMb.toFixed(0).padStart(6)}`);
    }
    const best = rows.reduce((a, b) => (b.peak.acceptedPerS > a.peak.acceptedPerS ? b : a));
    print(`  best: VERIFY_THREADS=${best.threads} VERIFY_BATCH=${best.batch} at ${formatRate(best.peak.acceptedPerS)} accepted/s`);
    print(JSON.stringify({
        verify_ceiling_per_s: Math.round(verifyCeiling),
        sweep: rows.map((r) => ({
            verify_threads: r.threads,
            verify_batch: r.batch,
            accepted_per_s: Math.round(r.peak.acceptedPerS),
            ratio: Number((r.peak.acceptedPerS / verifyCeiling).toFixed(3)),
            p99_ms: Number(r.peak.p99.toFixed(2)),
            peak_rss_mb: Number(r.rssMb.toFixed(1)),
        })),
    }));
}
//# sourceMappingURL=sweep.js.map