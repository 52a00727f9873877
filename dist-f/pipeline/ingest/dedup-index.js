export class DedupIndex {
    #windowMs;
    #bySignal = new Map();
    #byIdempotencyKey = new Map();
    #inFlight = new Map();
    constructor(options) {
        this.#windowMs = options.windowMs;
    }
    get size() {
        return this.#bySignal.size;
    }
    lookup(sourceId, signalId, idempotencyKey, bodySha256, now) {
        this.#expire(now, 8);
        const signalKey = `${sourceId}\n${signalId}`;
        const pending = this.#inFlight.get(signalKey) ?? (idempotencyKey === undefined ? undefined : this.#inFlight.get(`${sourceId}\n\n${idempotencyKey}`));
        if (pending !== undefined)
            return { kind: 'in_flight', settled: pending };
        const record = this.#live(this.#bySignal.get(signalKey), now) ??
            (idempotencyKey === undefined ? undefined : this.#live(this.#byIdempotencyKey.get(`${sourceId}\n${idempotencyKey}`), now));
        if (record === undefined)
            return { kind: 'new' };
        return record.bodySha256 === bodySha256 && record.signalId === signalId ? { kind: 'replay', record } : { kind: 'conflict', record };
    }
    /**
     * Marks the ids as being appended, so a concurrent duplicate waits instead of
     * racing to a second append. Returns the function that ends the reservation.
     */
    reserve(sourceId, signalId, idempotencyKey) {
        let release;
        const settled = new Promise((resolve) => (release = resolve));
        const keys = [`${sourceId}\n${signalId}`];
        if (idempotencyKey !== undefined)
            keys.push(`${sourceId}\n\n${idempotencyKey}`);
        for (const key of keys)
            this.#inFlight.set(key, settled);
        return () => {
            for (const key of keys)
                this.#inFlight.delete(key);
            release();
        };
    }
    remember(sourceId, idempotencyKey, record, acceptedAt) {
        const entry = { ...record, expiresAt: acceptedAt + this.#windowMs };
        this.#bySignal.set(`${sourceId}\n${record.signalId}`, entry);
        if (idempotencyKey !== undefined)
            this.#byIdempotencyKey.set(`${sourceId}\n${idempotencyKey}`, entry);
    }
    #live(record, now) {
        return record !== undefined && record.expiresAt > now ? record : undefined;
    }
    #expire(now, budget) {
        for (const map of [this.#bySignal, this.#byIdempotencyKey]) {
            let left = budget;
            for (const [key, record] of map) {
                if (record.expiresAt > now || left-- === 0)
                    break;
                map.delete(key);
            }
        }
    }
    sweep(now) {
        this.#expire(now, Number.POSITIVE_INFINITY);
    }
}
//# sourceMappingURL=dedup-index.js.map