import { LatencyHistogram } from './histogram.js';
/** Server bugs show up as unexpected statuses; a few full responses are kept to report them. */
const UNEXPECTED_SAMPLES = 5;
/** Counters of one phase; only responses inside the measuring window count. */
export class PhaseStats {
    statuses = {};
    latency = new LatencyHistogram();
    acceptedLatency = new LatencyHistogram();
    unexpected = [];
    inWindow = false;
    sent = 0;
    shedWithoutRetryAfter = 0;
    recycled = 0;
    dropped = 0;
    connectErrors = 0;
    unanswered = 0;
    exhausted = false;
    /** Records one response; returns true when the request was shed unverified and may be sent again. */
    record(res, startedAt, now) {
        const shed = res.status === 503 && res.text !== undefined && res.text.includes('"overloaded"');
        if (!this.inWindow)
            return shed;
        const key = String(res.status);
        this.statuses[key] = (this.statuses[key] ?? 0) + 1;
        this.latency.recordNs(now - startedAt);
        if (res.status === 202)
            this.acceptedLatency.recordNs(now - startedAt);
        else if (res.status === 503 && !res.retryAfter)
            this.shedWithoutRetryAfter++;
        if (!shed && res.status !== 202 && this.unexpected.length < UNEXPECTED_SAMPLES)
            this.unexpected.push(res.text ?? `status ${res.status}`);
        return shed;
    }
    result(spec, windowMs, signed, signMs, loadgenCpuMs) {
        return {
            name: spec.name,
            mode: spec.mode,
            connections: spec.connections,
            windowMs,
            signed,
            signMs,
            sent: this.sent,
            statuses: this.statuses,
            shedWithoutRetryAfter: this.shedWithoutRetryAfter,
            recycled: this.recycled,
            dropped: this.dropped,
            connectErrors: this.connectErrors,
            unanswered: this.unanswered,
            exhausted: this.exhausted,
            latency: this.latency.toArray(),
            acceptedLatency: this.acceptedLatency.toArray(),
            unexpected: this.unexpected,
            loadgenCpuMs,
        };
    }
}
//# sourceMappingURL=phase-stats.js.map