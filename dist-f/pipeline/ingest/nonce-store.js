import { ShardedExpiringIndex } from './expiring-index.js';
import { hash64 } from './string-hash.js';
export class NonceStore {
    #windowMs;
    #maxEntries;
    #maxPerScope;
    #index;
    #scopeOf;
    /** (source, key) → small integer, so an entry stores 4 bytes of scope, not two ids. */
    #scopeIds = new Map();
    #perScope = [];
    #hash = new Uint32Array(2);
    constructor(options) {
        this.#windowMs = options.windowMs;
        this.#maxEntries = options.maxEntries;
        this.#maxPerScope = Math.max(1, Math.floor(options.maxEntries * (options.maxPerScopeShare ?? 0.25)));
        this.#index = new ShardedExpiringIndex({
            initialCapacity: options.initialCapacity ?? 1 << 18,
            onEvict: (shard, slot) => {
                const scope = this.#scopeOf[shard]()[slot];
                this.#perScope[scope] = this.#perScope[scope] - 1;
            },
        });
        this.#scopeOf = this.#index.shards.map((s) => s.column((n) => new Uint32Array(n)));
    }
    get size() {
        return this.#index.size;
    }
    #scope(sourceId, keyId) {
        const name = `${sourceId}\n${keyId}`;
        let id = this.#scopeIds.get(name);
        if (id === undefined) {
            id = this.#scopeIds.size;
            this.#scopeIds.set(name, id);
            this.#perScope.push(0);
        }
        return id;
    }
    /** The slot of the live nonce in `shard`, or -1; the scope is compared too, so scopes never meet. */
    #find(shard, scope, now) {
        const scopes = this.#scopeOf[shard]();
        return this.#index.shards[shard].find(this.#hash[0], this.#hash[1], now, (slot) => scopes[slot] === scope);
    }
    /**
     * Claims `nonce` for the scope. `replayed` means it was claimed within the window;
     * `scope_full` and `store_full` mean the claim would pass a memory bound.
     */
    claim(sourceId, keyId, nonce, now, scopeCap) {
        this.#index.expireSome(now, 16);
        const scope = this.#scope(sourceId, keyId);
        hash64(nonce, scope, this.#hash);
        const shard = this.#index.shardOf(this.#hash[0]);
        if (this.#find(shard, scope, now) >= 0)
            return 'replayed';
        const full = () => this.#index.size >= this.#maxEntries ? 'store_full' : this.#perScope[scope] >= Math.min(scopeCap, this.#maxPerScope) ? 'scope_full' : undefined;
        // Expiry runs a little per claim; before refusing for a bound, drop everything expired.
        if (full() !== undefined)
            this.#index.sweep(now);
        const bound = full();
        if (bound !== undefined)
            return bound;
        this.#add(shard, scope, now + this.#windowMs);
        return 'claimed';
    }
    /** Re-inserts a nonce claimed at `claimedAt`, when rebuilding state after a restart. */
    restore(sourceId, keyId, nonce, claimedAt, now) {
        const expiresAt = claimedAt + this.#windowMs;
        if (expiresAt < now)
            return;
        const scope = this.#scope(sourceId, keyId);
        hash64(nonce, scope, this.#hash);
        const shard = this.#index.shardOf(this.#hash[0]);
        if (this.#find(shard, scope, now) < 0)
            this.#add(shard, scope, expiresAt);
    }
    #add(shard, scope, expiresAt) {
        const slot = this.#index.shards[shard].insert(this.#hash[0], this.#hash[1], expiresAt);
        this.#scopeOf[shard]()[slot] = scope;
        this.#perScope[scope] = this.#perScope[scope] + 1;
    }
    /** Drops every expired entry; called from a slow timer. */
    sweep(now) {
        this.#index.sweep(now);
    }
}
//# sourceMappingURL=nonce-store.js.map