import { LogError } from '../log-error.js';
/** Consumer names end up in file names and NATS subjects: keep them to a safe set. */
const CONSUMER_NAME = /^[A-Za-z0-9_-]{1,64}$/;
export class SignalLogBase {
    #state = 'idle';
    #opening;
    #closing;
    #opened = false;
    #inflight = new Set();
    open() {
        switch (this.#state) {
            case 'open':
                return Promise.resolve();
            case 'opening':
                return this.#opening;
            case 'closing':
            case 'closed':
                return Promise.reject(new LogError('log_closed', 'signal log is closed'));
            case 'idle':
                break;
        }
        this.#state = 'opening';
        this.#opening = this.onOpen().then(() => {
            this.#opened = true;
            if (this.#state === 'opening')
                this.#state = 'open';
        }, (err) => {
            // A failed open leaves nothing behind (the hook cleans up), so it may be retried.
            if (this.#state === 'opening')
                this.#state = 'idle';
            this.#opening = undefined;
            throw err;
        });
        return this.#opening;
    }
    append(dedupId, data) {
        return this.#run(() => {
            if (typeof dedupId !== 'string')
                throw invalid('dedup id must be a string');
            if (!(data instanceof Uint8Array))
                throw invalid('data must be a Uint8Array');
            return this.onAppend(dedupId, data);
        });
    }
    read(start, max) {
        return this.#run(() => {
            const from = checkStart(start);
            if (!Number.isSafeInteger(max) || max < 0)
                throw invalid('max must be a non-negative integer');
            if (max === 0)
                return Promise.resolve([]);
            return this.onRead(from, max);
        });
    }
    info() {
        if (!this.#opened)
            return { firstSeq: 0, lastSeq: 0, records: 0, bytes: 0 };
        return this.onInfo();
    }
    consumerPosition(name) {
        return this.#run(() => this.onConsumerPosition(checkConsumerName(name)));
    }
    ack(name, seq) {
        return this.#run(() => {
            checkConsumerName(name);
            if (!Number.isSafeInteger(seq) || seq < 0)
                throw invalid('ack seq must be a non-negative integer');
            // Acking a record that does not exist yet is a consumer bug; storing it would
            // make the consumer skip that record once it is written.
            if (seq > this.onInfo().lastSeq)
                throw invalid(`ack seq ${seq} is past the end of the log`);
            return this.onAck(name, seq);
        });
    }
    close() {
        this.#closing ??= this.#close();
        return this.#closing;
    }
    async #close() {
        const opening = this.#opening;
        this.#state = 'closing';
        if (opening !== undefined)
            await opening.catch(() => undefined);
        // Appends already accepted finish (and become durable) before the files close.
        while (this.#inflight.size > 0)
            await Promise.allSettled([...this.#inflight]);
        try {
            if (this.#opened)
                await this.onClose();
        }
        finally {
            this.#state = 'closed';
        }
    }
    #run(op) {
        if (this.#state !== 'open') {
            return Promise.reject(new LogError('log_closed', this.#state === 'idle' || this.#state === 'opening'
                ? 'signal log is not open'
                : 'signal log is closed'));
        }
        let p;
        try {
            p = op();
        }
        catch (err) {
            return Promise.reject(err);
        }
        this.#inflight.add(p);
        const forget = () => {
            this.#inflight.delete(p);
        };
        p.then(forget, forget);
        return p;
    }
}
function invalid(message) {
    return new LogError('invalid_argument', message);
}
function checkConsumerName(name) {
    if (typeof name !== 'string' || !CONSUMER_NAME.test(name)) {
        throw invalid('consumer name must match [A-Za-z0-9_-]{1,64}');
    }
    return name;
}
function checkStart(start) {
    if (typeof start !== 'object' || start === null)
        throw invalid('read start must be { fromSeq } or { fromTime }');
    const hasSeq = 'fromSeq' in start;
    const hasTime = 'fromTime' in start;
    if (hasSeq === hasTime)
        throw invalid('read start must have exactly one of fromSeq and fromTime');
    const value = hasSeq ? start.fromSeq : start.fromTime;
    if (!Number.isSafeInteger(value) || value < 0)
        throw invalid('read start must be a non-negative integer');
    return hasSeq ? { fromSeq: value } : { fromTime: value };
}
//# sourceMappingURL=signal-log-base.js.map