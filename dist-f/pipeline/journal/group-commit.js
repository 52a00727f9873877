/**
 * Group commit: items submitted while a commit is in flight wait and go out together
 * in the next one. With fdatasync costing the same for 1 record as for 1,000, this is
 * what turns a sync-per-append log (a few thousand appends/s) into one whose
 * throughput grows with concurrency.
 *
 * Each `submit` resolves only once the commit that carried its item has completed,
 * and rejects with that commit's error. Commits never overlap.
 */
export class GroupCommit {
    #commit;
    #sizeOf;
    #maxBatch;
    #queue = [];
    #running;
    #scheduled = false;
    constructor(opts) {
        this.#commit = opts.commit;
        this.#sizeOf = opts.sizeOf ?? (() => 1);
        this.#maxBatch = opts.maxBatchBytes ?? Number.POSITIVE_INFINITY;
    }
    /** Items waiting for a commit, plus those in the commit under way. */
    get busy() {
        return this.#running !== undefined || this.#queue.length > 0;
    }
    submit(item) {
        return new Promise((resolve, reject) => {
            this.#queue.push({ item, size: this.#sizeOf(item), resolve, reject });
            if (this.#running === undefined && !this.#scheduled) {
                // Deferred to a microtask so that appends issued in the same tick share the
                // first commit instead of the first one going out alone.
                this.#scheduled = true;
                queueMicrotask(() => {
                    this.#scheduled = false;
                    if (this.#running === undefined)
                        this.#running = this.#run();
                });
            }
        });
    }
    /** Resolves once everything submitted so far has been committed or has failed. */
    async drain() {
        while (this.busy || this.#scheduled) {
            if (this.#running !== undefined)
                await this.#running;
            else
                await new Promise((resolve) => queueMicrotask(resolve));
        }
    }
    async #run() {
        try {
            while (this.#queue.length > 0) {
                const batch = this.#take();
                try {
                    await this.#commit(batch.map((w) => w.item));
                    for (const w of batch)
                        w.resolve();
                }
                catch (err) {
                    for (const w of batch)
                        w.reject(err);
                }
            }
        }
        finally {
            this.#running = undefined;
        }
    }
    #take() {
        let bytes = 0;
        let n = 0;
        // Always take at least one item, so an item larger than the bound still goes out.
        while (n < this.#queue.length && (n === 0 || bytes + this.#queue[n].size <= this.#maxBatch)) {
            bytes += this.#queue[n].size;
            n++;
        }
        if (n === this.#queue.length) {
            const all = this.#queue;
            this.#queue = [];
            return all;
        }
        return this.#queue.splice(0, n);
    }
}
//# sourceMappingURL=group-commit.js.map