/**
 * Reads request bodies with a byte limit and a deadline. uWS hands body chunks that
 * are only valid during the callback, so each is copied out. The deadline defends
 * against slow bodies (a client trickling bytes to hold a connection and a buffer):
 * one coarse timer sweeps every upload rather than a timer per request.
 */
export class BodyReader {
    #timeoutMs;
    #uploads = new Set();
    #timer;
    constructor(timeoutMs) {
        this.#timeoutMs = timeoutMs;
        this.#timer = setInterval(() => this.#sweep(), Math.min(250, timeoutMs)).unref();
    }
    #sweep() {
        const now = Date.now();
        for (const upload of this.#uploads) {
            if (upload.deadline <= now) {
                this.#uploads.delete(upload);
                upload.onTimeout();
            }
        }
    }
    /**
     * Collects up to `limit` bytes. `onBody` gets the whole body; `onTimeout` fires if it
     * has not arrived in time, `onTooLarge` if it exceeds the limit (possible only when
     * the declared length was not checked first). At most one of the three fires. The
     * returned function cancels the upload and drops what it holds: uWS calls nothing
     * more once a client is gone, so the caller cancels from its abort handler.
     */
    read(res, limit, handlers) {
        // uWS may keep the onData callback until the connection's next request, so the
        // callback reaches the upload only through `live`, which is emptied the moment the
        // upload ends: the body and the request's whole state are then free to go at once,
        // rather than outliving the request and being promoted to the old generation.
        let live = { chunks: [], size: 0, handlers };
        const upload = {
            deadline: Date.now() + this.#timeoutMs,
            onTimeout: () => {
                const state = live;
                live = undefined;
                state?.handlers.onTimeout();
            },
        };
        this.#uploads.add(upload);
        res.onData((chunk, isLast) => {
            const state = live;
            if (state === undefined)
                return;
            state.size += chunk.byteLength;
            if (state.size > limit) {
                live = undefined;
                this.#uploads.delete(upload);
                state.handlers.onTooLarge();
                return;
            }
            if (chunk.byteLength > 0)
                state.chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
            if (isLast) {
                live = undefined;
                this.#uploads.delete(upload);
                state.handlers.onBody(state.chunks.length === 1 ? state.chunks[0] : Buffer.concat(state.chunks, state.size));
            }
        });
        return () => {
            live = undefined;
            this.#uploads.delete(upload);
        };
    }
    close() {
        clearInterval(this.#timer);
    }
}
//# sourceMappingURL=body-reader.js.map