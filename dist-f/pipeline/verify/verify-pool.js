import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { packBatch } from './verify-batch.js';
/**
 * Batches handed to one worker at a time. With one, a worker that finishes a batch
 * sits idle until the event loop has taken the results and sent the next batch; with
 * two, the next batch is already in its message queue.
 */
const BATCHES_PER_WORKER = 2;
/** Thrown by `verify` once the pool is closing: the caller answers 503, not 500. */
export class PoolClosedError extends Error {
    code = 'pool_closed';
    constructor() {
        super('verify pool is closed');
        this.name = 'PoolClosedError';
    }
}
export const isPoolClosed = (err) => err instanceof PoolClosedError;
/** The worker module sits beside this file: `.js` once built, `.ts` under the test loader. */
function workerFile() {
    const js = fileURLToPath(new URL('./verify-worker.js', import.meta.url));
    return existsSync(js) ? js : fileURLToPath(new URL('./verify-worker.ts', import.meta.url));
}
/**
 * Ed25519 verification off the event loop. Requests are gathered into batches: a
 * batch leaves as soon as a worker is free (so a lone request is not delayed) and
 * otherwise grows up to `batchSize` while the workers are busy, which is when
 * amortising the thread hop pays.
 *
 * The number of requests waiting is bounded by `queueLimit`, counted from the moment
 * the edge decides to read a body: the edge takes a slot with `reserve()` before
 * reading, and either spends it on `verify()` or gives it back with `release()`, so
 * bodies in transit count against the bound too.
 */
export class VerifyPool {
    #piscina;
    #threads;
    #batchSize;
    #queueLimit;
    #maxWaitMs;
    #waiting = [];
    #batchesInFlight = 0;
    #pending = 0;
    #flushScheduled = false;
    #closed = false;
    constructor(options) {
        // The event loop needs a core of its own: on two cores one worker accepted about 12 %
        // more signals per second at peak than two (README, Benchmark), which only fought the
        // main thread for the cores.
        this.#threads = options.threads > 0 ? options.threads : Math.max(1, availableParallelism() - 1);
        this.#batchSize = options.batchSize;
        this.#queueLimit = options.queueLimit;
        this.#maxWaitMs = options.maxWaitMs;
        this.#piscina = new Piscina({
            filename: workerFile(),
            minThreads: this.#threads,
            maxThreads: this.#threads,
            concurrentTasksPerWorker: BATCHES_PER_WORKER,
            // Batches are dispatched only when a worker is free, so piscina's own queue stays short.
            maxQueue: this.#threads * 4,
            idleTimeout: Number.POSITIVE_INFINITY,
        });
    }
    get threads() {
        return this.#threads;
    }
    /** Slots taken: requests being read or verified. */
    get pending() {
        return this.#pending;
    }
    /** Whether a slot is free now (a cheap look before any parsing). */
    hasRoom() {
        if (this.#closed || this.#pending >= this.#queueLimit)
            return false;
        const oldest = this.#waiting[0];
        return oldest === undefined || performance.now() - oldest.queuedAt <= this.#maxWaitMs;
    }
    /** Takes a slot if one is free; false means shed. */
    reserve() {
        if (!this.hasRoom())
            return false;
        this.#pending++;
        return true;
    }
    /** Gives back a slot that will not be spent on `verify`. */
    release() {
        this.#pending--;
    }
    /** Verifies one signature, spending a slot taken with `reserve()`. */
    verify(item) {
        if (this.#closed) {
            this.#pending--;
            return Promise.reject(new PoolClosedError());
        }
        // The batch packs fixed-width fields: a key or signature of another length would be
        // cut or padded there, so it is refused here, as verifyEd25519 refuses it.
        if (item.publicKey.length !== 32 || item.signature.length !== 64) {
            this.#pending--;
            return Promise.resolve(false);
        }
        return new Promise((resolve, reject) => {
            this.#waiting.push({ item, queuedAt: performance.now(), resolve, reject });
            if (this.#waiting.length >= this.#batchSize)
                this.#dispatch();
            else if (!this.#flushScheduled) {
                this.#flushScheduled = true;
                setImmediate(() => {
                    this.#flushScheduled = false;
                    this.#dispatch();
                });
            }
        });
    }
    /**
     * Sends batches while workers are free, splitting what waits evenly across the free
     * workers (a short queue all sent to one worker would leave the others idle);
     * leftovers wait for the next completion.
     */
    #dispatch() {
        while (this.#waiting.length > 0 && this.#batchesInFlight < this.#threads * BATCHES_PER_WORKER) {
            const free = this.#threads * BATCHES_PER_WORKER - this.#batchesInFlight;
            const size = Math.min(this.#batchSize, Math.ceil(this.#waiting.length / free));
            this.#run(this.#waiting.splice(0, size));
        }
    }
    #run(waiters) {
        this.#batchesInFlight++;
        const batch = packBatch(waiters.map((w) => w.item));
        this.#piscina
            .run(batch, { transferList: [batch.keys, batch.signatures, batch.messages, batch.messageEnds.buffer] })
            .then((results) => waiters.forEach((w, i) => w.resolve(results[i] === 1)), (err) => waiters.forEach((w) => w.reject(err)))
            .finally(() => {
            this.#batchesInFlight--;
            this.#pending -= waiters.length;
            this.#dispatch();
        });
    }
    /** Finishes what is queued, then stops the workers. Safe to call twice. */
    async close() {
        if (this.#closed)
            return;
        this.#closed = true;
        while (this.#waiting.length > 0 || this.#batchesInFlight > 0) {
            this.#dispatch();
            await new Promise((resolve) => setTimeout(resolve, 5));
        }
        await this.#piscina.destroy();
    }
}
//# sourceMappingURL=verify-pool.js.map