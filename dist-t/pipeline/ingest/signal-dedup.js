import { ShardedExpiringIndex } from './expiring-index.js';
import { hash64 } from './string-hash.js';
/** One table: id hash → (source, body hash prefix, signal id hash, arrival, test flag). */
class DedupTable {
    index;
    source;
    body;
    signal;
    receivedAt;
    test;
    constructor(initialCapacity) {
        this.index = new ShardedExpiringIndex({ initialCapacity });
        const each = (make, width = 1) => this.index.shards.map((s) => s.column(make, width));
        this.source = each((n) => new Uint32Array(n));
        this.body = each((n) => new Uint32Array(n), 4);
        this.signal = each((n) => new Uint32Array(n), 2);
        this.receivedAt = each((n) => new Float64Array(n));
        this.test = each((n) => new Uint8Array(n));
    }
}
/** First 128 bits of a hex SHA-256 as four words. */
function bodyWords(hex, out) {
    for (let i = 0; i < 4; i++)
        out[i] = parseInt(hex.slice(i * 8, i * 8 + 8), 16) >>> 0;
}
export class SignalDedup {
    #windowMs;
    #bySignal;
    #byIdempotencyKey;
    #inFlight = new Map();
    /** source id → small integer, stored with each entry and used as the hash seed. */
    #sources = new Map();
    #idHash = new Uint32Array(2);
    #signalHash = new Uint32Array(2);
    #words = new Uint32Array(4);
    /** The signal id hashed by the last lookup: `remember` of the same signal reuses it (a SHA-256 saved per accept). */
    #lastSignal = '';
    #lastSignalHash = new Uint32Array(2);
    constructor(options) {
        this.#windowMs = options.windowMs;
        this.#bySignal = new DedupTable(options.initialCapacity ?? 1 << 18);
        this.#byIdempotencyKey = new DedupTable(1 << 12);
    }
    get size() {
        return this.#bySignal.index.size + this.#byIdempotencyKey.index.size;
    }
    #source(sourceId) {
        let n = this.#sources.get(sourceId);
        if (n === undefined) {
            n = this.#sources.size + 1;
            this.#sources.set(sourceId, n);
        }
        return n;
    }
    /** Looks `id` up in `table` for this source; the hash lands in #idHash. */
    #find(table, source, id, now) {
        hash64(id, source, this.#idHash);
        const shard = table.index.shardOf(this.#idHash[0]);
        const sources = table.source[shard]();
        const slot = table.index.shards[shard].find(this.#idHash[0], this.#idHash[1], now, (s) => sources[s] === source);
        return slot < 0 ? undefined : { table, shard, slot };
    }
    /** True when the entry is this very signal with this very body. */
    #same(hit) {
        const body = hit.table.body[hit.shard]();
        const sig = hit.table.signal[hit.shard]();
        const s = hit.slot;
        return (sig[s * 2] === this.#signalHash[0] &&
            sig[s * 2 + 1] === this.#signalHash[1] &&
            body[s * 4] === this.#words[0] &&
            body[s * 4 + 1] === this.#words[1] &&
            body[s * 4 + 2] === this.#words[2] &&
            body[s * 4 + 3] === this.#words[3]);
    }
    lookup(sourceId, signalId, idempotencyKey, bodySha256, now) {
        this.#bySignal.index.expireSome(now, 16);
        this.#byIdempotencyKey.index.expireSome(now, 16);
        const separateKey = idempotencyKey !== undefined && idempotencyKey !== signalId ? idempotencyKey : undefined;
        const pending = this.#inFlight.get(`${sourceId}\n${signalId}`) ??
            (separateKey === undefined ? undefined : (this.#inFlight.get(`${sourceId}\n${separateKey}`) ?? this.#inFlight.get(`${sourceId}\n\n${separateKey}`)));
        if (pending !== undefined)
            return { kind: 'in_flight', settled: pending };
        const source = this.#source(sourceId);
        bodyWords(bodySha256, this.#words);
        const bySignal = this.#find(this.#bySignal, source, signalId, now);
        this.#signalHash.set(this.#idHash);
        this.#lastSignal = `${source}\n${signalId}`;
        this.#lastSignalHash.set(this.#idHash);
        if (bySignal !== undefined && !this.#same(bySignal))
            return { kind: 'conflict' };
        if (separateKey !== undefined) {
            // The key may be held under its own entry, or be another signal's own id.
            const byKey = this.#find(this.#byIdempotencyKey, source, separateKey, now) ?? this.#find(this.#bySignal, source, separateKey, now);
            if (byKey !== undefined && !this.#same(byKey))
                return { kind: 'conflict' };
        }
        if (bySignal === undefined)
            return { kind: 'new' };
        const { table, shard, slot } = bySignal;
        return {
            kind: 'replay',
            record: {
                bodySha256,
                signalId,
                receivedAtMs: table.receivedAt[shard]()[slot],
                test: table.test[shard]()[slot] === 1,
            },
        };
    }
    /**
     * Marks the ids as being appended, so a concurrent duplicate waits instead of
     * racing to a second append. Returns the function that ends the reservation.
     */
    reserve(sourceId, signalId, idempotencyKey) {
        let release;
        const settled = new Promise((resolve) => (release = resolve));
        const keys = [`${sourceId}\n${signalId}`];
        if (idempotencyKey !== undefined && idempotencyKey !== signalId)
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
        const source = this.#source(sourceId);
        const expiresAt = acceptedAt + this.#windowMs;
        bodyWords(record.bodySha256, this.#words);
        if (this.#lastSignal === `${source}\n${record.signalId}`)
            this.#signalHash.set(this.#lastSignalHash);
        else
            hash64(record.signalId, source, this.#signalHash);
        this.#store(this.#bySignal, source, this.#signalHash, expiresAt, record);
        if (idempotencyKey !== undefined && idempotencyKey !== record.signalId) {
            hash64(idempotencyKey, source, this.#idHash);
            this.#store(this.#byIdempotencyKey, source, this.#idHash, expiresAt, record);
        }
    }
    #store(table, source, key, expiresAt, record) {
        const shard = table.index.shardOf(key[0]);
        const slot = table.index.shards[shard].insert(key[0], key[1], expiresAt);
        table.source[shard]()[slot] = source;
        table.body[shard]().set(this.#words, slot * 4);
        const sig = table.signal[shard]();
        sig[slot * 2] = this.#signalHash[0];
        sig[slot * 2 + 1] = this.#signalHash[1];
        table.receivedAt[shard]()[slot] = record.receivedAtMs;
        table.test[shard]()[slot] = record.test ? 1 : 0;
    }
    sweep(now) {
        this.#bySignal.index.sweep(now);
        this.#byIdempotencyKey.index.sweep(now);
    }
}
//# sourceMappingURL=signal-dedup.js.map