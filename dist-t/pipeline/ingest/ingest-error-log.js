/**
 * Refused ingest requests per source, newest first. Held in memory in two rings per
 * source of `perSource` entries each: refusals of requests whose signature verified
 * (they came from the creator) and the rest. Anyone can send unsigned junk naming a
 * source; it fills only the second ring and never pushes the creator's own refusals
 * out. Appended to a diagnostics log on disk so the history survives a restart; the
 * disk write is not awaited: diagnostics must never slow the answer down.
 */
export class IngestErrorLog {
    #log;
    #perSource;
    #bySource = new Map();
    #onWriteError;
    #seq = 0;
    constructor(log, options) {
        this.#log = log;
        this.#perSource = options.perSource;
        this.#onWriteError = options.onWriteError;
    }
    /**
     * Reloads the history from the diagnostics log and hands back the nonces claimed by
     * refused requests within `nonceSinceMs`, so the caller can restore them.
     */
    async load(nonceSinceMs) {
        const nonces = [];
        const info = this.#log.info();
        let next = info.firstSeq === 0 ? 1 : info.firstSeq;
        for (;;) {
            const batch = await this.#log.read({ fromSeq: next }, 4096);
            if (batch.length === 0)
                break;
            for (const r of batch) {
                const stored = JSON.parse(Buffer.from(r.data).toString('utf8'));
                const { source_id, nonce, ...record } = stored;
                this.#push(source_id, record, nonce !== undefined);
                if (nonce !== undefined && record.key_id !== null && r.time >= nonceSinceMs) {
                    nonces.push({ sourceId: source_id, keyId: record.key_id, nonce, time: r.time });
                }
            }
            next = batch[batch.length - 1].seq + 1;
        }
        return nonces;
    }
    /** `claimedNonce` is given when the signature verified and the nonce was claimed. */
    record(sourceId, record, claimedNonce) {
        this.#push(sourceId, record, claimedNonce !== undefined);
        const stored = claimedNonce === undefined ? { ...record, source_id: sourceId } : { ...record, source_id: sourceId, nonce: claimedNonce };
        // An empty dedup id turns the log's dedup off: every refusal is its own record,
        // and the log keeps no per-record memory for it.
        this.#log.append('', Buffer.from(JSON.stringify(stored))).catch(this.#onWriteError);
    }
    #push(sourceId, record, verified) {
        let rings = this.#bySource.get(sourceId);
        if (rings === undefined) {
            rings = { verified: [], unverified: [] };
            this.#bySource.set(sourceId, rings);
        }
        const ring = verified ? rings.verified : rings.unverified;
        ring.push({ seq: ++this.#seq, record });
        // Trim in steps, not per record: splice is O(n).
        if (ring.length > this.#perSource * 1.25)
            ring.splice(0, ring.length - this.#perSource);
    }
    /** Newest first; `cursor` is the opaque `next_cursor` of the previous page. */
    page(sourceId, limit, cursor) {
        let before = Number.POSITIVE_INFINITY;
        if (cursor !== undefined) {
            const decoded = Number(Buffer.from(cursor, 'base64url').toString('utf8'));
            if (!Number.isSafeInteger(decoded) || decoded <= 0)
                return undefined;
            before = decoded;
        }
        const rings = this.#bySource.get(sourceId);
        if (rings === undefined)
            return { items: [], nextCursor: null };
        // Merge the two rings newest first, both already in seq order.
        let a = lastBefore(rings.verified, before);
        let b = lastBefore(rings.unverified, before);
        const items = [];
        let lastSeq = 0;
        while (items.length < limit && (a >= 0 || b >= 0)) {
            const fromA = b < 0 || (a >= 0 && rings.verified[a].seq > rings.unverified[b].seq);
            const entry = (fromA ? rings.verified[a--] : rings.unverified[b--]);
            items.push(entry.record);
            lastSeq = entry.seq;
        }
        const more = a >= 0 || b >= 0;
        return { items, nextCursor: more ? Buffer.from(String(lastSeq)).toString('base64url') : null };
    }
}
/** Index of the newest entry with seq below `before`, or -1. */
function lastBefore(ring, before) {
    let i = ring.length - 1;
    while (i >= 0 && ring[i].seq >= before)
        i--;
    return i;
}
//# sourceMappingURL=ingest-error-log.js.map