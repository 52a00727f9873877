/**
 * Remembers dedup ids for `windowMs`, like JetStream's duplicate window: a second
 * append with a remembered id is answered with the first record's seq and writes
 * nothing.
 *
 * Memory: each remembered id costs about 190 bytes plus the id's length on 64-bit Node
 * without pointer compression (the entry object and its boxed time, the Map slot, the
 * expiry-queue slot, the key string); measured: 232 bytes per entry with 41-byte ids.
 * At the 20-minute window of DESIGN section 4 that is ~280 KB per sustained append/s:
 * 1,000 appends/s holds 1.2 M ids, ~280 MB. Entries leave by time only, never by
 * count, because forgetting an id early would let a retry create a second record.
 */
/** Queue compaction threshold: below it, the dead head costs less than copying. */
const COMPACT_MIN = 1024;
export class DedupIndex {
    windowMs;
    #byId = new Map();
    /** Entries in append order, which is time order: expiry pops from the head. */
    #queue = [];
    #head = 0;
    constructor(windowMs) {
        this.windowMs = windowMs;
    }
    get size() {
        return this.#byId.size;
    }
    /** The live entry for `id`, if its window has not passed at `now`. */
    get(id, now) {
        const entry = this.#byId.get(id);
        if (entry === undefined)
            return undefined;
        // Checked here as well as in `sweep`, so expiry is exact whatever the sweep period.
        if (this.#expired(entry, now)) {
            this.#byId.delete(id);
            return undefined;
        }
        return entry;
    }
    add(id, seq, time, pending) {
        const entry = { id, seq, time, pending };
        this.#byId.set(id, entry);
        this.#queue.push(entry);
        return entry;
    }
    /** Drops every entry whose window has passed. */
    sweep(now) {
        const q = this.#queue;
        while (this.#head < q.length && this.#expired(q[this.#head], now)) {
            const entry = q[this.#head];
            // The id may have been re-added after an earlier expiry: only drop this entry.
            if (this.#byId.get(entry.id) === entry)
                this.#byId.delete(entry.id);
            q[this.#head] = undefined;
            this.#head++;
        }
        if (this.#head >= COMPACT_MIN && this.#head * 2 >= q.length) {
            this.#queue = q.slice(this.#head);
            this.#head = 0;
        }
    }
    clear() {
        this.#byId.clear();
        this.#queue = [];
        this.#head = 0;
    }
    #expired(entry, now) {
        return now - entry.time >= this.windowMs;
    }
}
//# sourceMappingURL=dedup-index.js.map