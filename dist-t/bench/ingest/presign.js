import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
/** Pre-signed requests for one phase, handed out once each. */
export class RequestPool {
    #chunks;
    #chunk = 0;
    #index = 0;
    /** Shed requests put back: the gateway never verified them, so their nonces are unspent. */
    #returned = [];
    size;
    constructor(chunks) {
        this.#chunks = chunks.map((c) => ({ data: Buffer.from(c.data), ends: c.ends }));
        this.size = chunks.reduce((n, c) => n + c.ends.length, 0);
    }
    /** The next unsent request (a view into the chunk, no copy), or undefined when all are used. */
    take() {
        const back = this.#returned.pop();
        if (back !== undefined)
            return back;
        for (;;) {
            const chunk = this.#chunks[this.#chunk];
            if (chunk === undefined)
                return undefined;
            if (this.#index < chunk.ends.length) {
                const start = this.#index === 0 ? 0 : chunk.ends[this.#index - 1];
                const end = chunk.ends[this.#index];
                this.#index++;
                return chunk.data.subarray(start, end);
            }
            this.#chunk++;
            this.#index = 0;
        }
    }
    giveBack(request) {
        this.#returned.push(request);
    }
}
/** One signing worker per core; they sit idle while a phase runs. */
export class Presigner {
    #workers;
    #next = 0;
    constructor(threads = availableParallelism()) {
        const file = new URL('./presign-worker.js', import.meta.url);
        this.#workers = Array.from({ length: Math.max(1, threads) }, () => new Worker(file));
    }
    /** Signs `count` requests spread over the sources; returns them in index order. */
    async sign(port, sources, tag, count) {
        const per = Math.ceil(count / this.#workers.length);
        const jobs = this.#workers.map((worker, w) => {
            const first = this.#next + w * per;
            const n = Math.max(0, Math.min(per, count - w * per));
            const job = { port, sources, tag, first, count: n };
            return new Promise((resolve, reject) => {
                const onError = (err) => {
                    worker.off('message', onMessage);
                    reject(err);
                };
                const onMessage = (chunk) => {
                    worker.off('error', onError);
                    resolve(chunk);
                };
                worker.once('message', onMessage);
                worker.once('error', onError);
                worker.postMessage(job);
            });
        });
        this.#next += count;
        return new RequestPool(await Promise.all(jobs));
    }
    async close() {
        await Promise.all(this.#workers.map((w) => w.terminate()));
    }
}
//# sourceMappingURL=presign.js.map