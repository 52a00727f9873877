export class ExpiringIndex {
    #capacity;
    #head = 0;
    #count = 0;
    #keyHi;
    #keyLo;
    #expiresAt;
    /** Slot + 1 per table cell; 0 is empty. Twice the ring's capacity keeps probes short. */
    #table;
    #columns = [];
    #onEvict;
    constructor(options) {
        this.#capacity = 1 << Math.ceil(Math.log2(Math.max(16, options.initialCapacity)));
        this.#keyHi = new Uint32Array(this.#capacity);
        this.#keyLo = new Uint32Array(this.#capacity);
        this.#expiresAt = new Float64Array(this.#capacity);
        this.#table = new Uint32Array(this.#capacity * 2);
        this.#onEvict = options.onEvict;
    }
    /** Live and not yet evicted entries. */
    get size() {
        return this.#count;
    }
    /** Adds a column of `width` values per entry; read it through the returned getter, which follows growth. */
    column(make, width = 1) {
        const entry = { array: make(this.#capacity * width), width, make: make };
        this.#columns.push(entry);
        return () => entry.array;
    }
    /**
     * The slot of the live entry for the key, or -1. `accept` lets a caller require a
     * column to match too (a scope, a source), so entries of two owners whose hashes
     * collide are never mistaken for each other.
     */
    find(hi, lo, now, accept) {
        const mask = this.#table.length - 1;
        for (let cell = this.#home(hi, lo);; cell = (cell + 1) & mask) {
            const ref = this.#table[cell];
            if (ref === 0)
                return -1;
            const slot = ref - 1;
            if (this.#keyHi[slot] === hi && this.#keyLo[slot] === lo && this.#expiresAt[slot] >= now && (accept === undefined || accept(slot))) {
                return slot;
            }
        }
    }
    /** Adds an entry and returns its slot, for the caller to fill its columns. */
    insert(hi, lo, expiresAt) {
        if (this.#count === this.#capacity)
            this.#grow();
        const slot = (this.#head + this.#count) & (this.#capacity - 1);
        this.#count++;
        this.#keyHi[slot] = hi;
        this.#keyLo[slot] = lo;
        this.#expiresAt[slot] = expiresAt;
        this.#place(slot);
        return slot;
    }
    /** Evicts up to `budget` expired entries from the head. */
    expire(now, budget = Number.POSITIVE_INFINITY) {
        while (this.#count > 0 && budget-- > 0) {
            const slot = this.#head;
            if (this.#expiresAt[slot] >= now)
                return;
            this.#unplace(slot);
            this.#onEvict?.(slot);
            this.#head = (this.#head + 1) & (this.#capacity - 1);
            this.#count--;
        }
    }
    /** The table cell where probing for a key starts. */
    #home(hi, lo) {
        return (hi ^ Math.imul(lo, 0x9e3779b1)) & (this.#table.length - 1);
    }
    #homeOf(slot) {
        return this.#home(this.#keyHi[slot], this.#keyLo[slot]);
    }
    #place(slot) {
        const mask = this.#table.length - 1;
        let cell = this.#homeOf(slot);
        while (this.#table[cell] !== 0)
            cell = (cell + 1) & mask;
        this.#table[cell] = slot + 1;
    }
    /** Backward-shift deletion: keeps every probe chain unbroken without tombstones. */
    #unplace(slot) {
        const table = this.#table;
        const mask = table.length - 1;
        let cell = this.#homeOf(slot);
        while (table[cell] !== slot + 1) {
            if (table[cell] === 0)
                return;
            cell = (cell + 1) & mask;
        }
        let hole = cell;
        for (let next = (hole + 1) & mask; table[next] !== 0; next = (next + 1) & mask) {
            const other = table[next] - 1;
            const home = this.#homeOf(other);
            // Move `other` into the hole unless its home lies cyclically in (hole, next].
            const inRange = hole <= next ? home > hole && home <= next : home > hole || home <= next;
            if (!inRange) {
                table[hole] = table[next];
                hole = next;
            }
        }
        table[hole] = 0;
    }
    /**
     * Doubles the ring, keeping entry order, and rebuilds the table. Called only when
     * the ring is full, so it wraps at most once: two block copies per column (a copy per
     * entry stalled the event loop for over 100 ms at a quarter million entries).
     */
    #grow() {
        const old = this.#capacity;
        const capacity = old * 2;
        const head = this.#head;
        const remap = (array, make, width) => {
            const next = make(capacity * width);
            next.set(array.subarray(head * width, old * width), 0);
            next.set(array.subarray(0, head * width), (old - head) * width);
            return next;
        };
        this.#keyHi = remap(this.#keyHi, (n) => new Uint32Array(n), 1);
        this.#keyLo = remap(this.#keyLo, (n) => new Uint32Array(n), 1);
        this.#expiresAt = remap(this.#expiresAt, (n) => new Float64Array(n), 1);
        for (const c of this.#columns)
            c.array = remap(c.array, c.make, c.width);
        this.#capacity = capacity;
        this.#head = 0;
        this.#table = new Uint32Array(capacity * 2);
        for (let slot = 0; slot < this.#count; slot++)
            this.#place(slot);
    }
}
/**
 * ExpiringIndex split by the key's low bits into shards that grow one at a time, so a
 * growth copies 1/32 of the entries: the stall at millions of entries stays a few
 * milliseconds instead of a second.
 */
export class ShardedExpiringIndex {
    static SHARDS = 32;
    shards;
    #nextToExpire = 0;
    constructor(options) {
        const perShard = Math.max(16, Math.ceil(options.initialCapacity / ShardedExpiringIndex.SHARDS));
        const onEvict = options.onEvict;
        this.shards = Array.from({ length: ShardedExpiringIndex.SHARDS }, (_, i) => new ExpiringIndex({ initialCapacity: perShard, ...(onEvict ? { onEvict: (slot) => onEvict(i, slot) } : {}) }));
    }
    shardOf(hi) {
        return hi & (ShardedExpiringIndex.SHARDS - 1);
    }
    get size() {
        let n = 0;
        for (const s of this.shards)
            n += s.size;
        return n;
    }
    /** A little expiry per call, on two shards in turn; `sweep` does the rest. */
    expireSome(now, budget) {
        for (let i = 0; i < 2; i++) {
            ;
            this.shards[this.#nextToExpire].expire(now, budget);
            this.#nextToExpire = (this.#nextToExpire + 1) % ShardedExpiringIndex.SHARDS;
        }
    }
    sweep(now) {
        for (const s of this.shards)
            s.expire(now);
    }
}
//# sourceMappingURL=expiring-index.js.map