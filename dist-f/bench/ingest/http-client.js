import { connect } from 'node:net';
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)/i;
const RETRY_AFTER = /\r\nretry-after:/i;
const CONNECTION_CLOSE = /\r\nconnection:[ \t]*close/i;
/** After a failed connect, wait before the next try so a refused port is not a busy loop. */
const RECONNECT_DELAY_MS = 20;
export class Connection {
    #port;
    #handler;
    #socket;
    #buffered;
    #request;
    #startedAt = 0n;
    #connected = false;
    #stopped = false;
    constructor(port, handler) {
        this.#port = port;
        this.#handler = handler;
        this.#open();
    }
    get busy() {
        return this.#request !== undefined;
    }
    /** Writes `request`; `startedAt` (hrtime ns) is what latency is measured from. */
    send(request, startedAt) {
        if (this.#socket === undefined || !this.#connected || this.#request !== undefined)
            throw new Error('connection is not ready');
        this.#request = request;
        this.#startedAt = startedAt;
        this.#socket.write(request);
    }
    /** Closes for good: no reconnect, no further callbacks. */
    stop() {
        this.#stopped = true;
        this.#socket?.destroy();
        this.#socket = undefined;
    }
    #open() {
        const socket = connect({ port: this.#port, host: '127.0.0.1', noDelay: true });
        this.#socket = socket;
        this.#connected = false;
        this.#buffered = undefined;
        socket.on('connect', () => {
            this.#connected = true;
            if (!this.#stopped)
                this.#handler.ready(this);
        });
        socket.on('data', (chunk) => this.#onData(socket, chunk));
        socket.on('error', (err) => {
            if (!this.#connected && !this.#stopped)
                this.#handler.connectError(this, err);
        });
        socket.on('close', () => this.#onClose(socket));
    }
    #onClose(socket) {
        // A close of a socket we already replaced (after Connection: close) is old news.
        if (socket !== this.#socket || this.#stopped)
            return;
        const wasConnected = this.#connected;
        const request = this.#request;
        this.#request = undefined;
        this.#socket = undefined;
        if (request !== undefined)
            this.#handler.dropped(this, request);
        if (this.#stopped)
            return;
        if (wasConnected)
            this.#open();
        else
            setTimeout(() => this.#stopped || this.#open(), RECONNECT_DELAY_MS);
    }
    #onData(socket, chunk) {
        if (socket !== this.#socket)
            return;
        const data = this.#buffered === undefined ? chunk : Buffer.concat([this.#buffered, chunk]);
        const headEnd = data.indexOf(HEAD_END);
        if (headEnd < 0) {
            this.#buffered = data;
            return;
        }
        const head = data.toString('latin1', 0, headEnd);
        const length = Number(CONTENT_LENGTH.exec(head)?.[1] ?? 0);
        const total = headEnd + 4 + length;
        if (data.length < total) {
            this.#buffered = data;
            return;
        }
        this.#buffered = undefined;
        // "HTTP/1.1 202 Accepted": the status is always bytes 9 to 11.
        const status = (data[9] - 48) * 100 + (data[10] - 48) * 10 + (data[11] - 48);
        const res = {
            status,
            retryAfter: status === 503 || status === 429 ? RETRY_AFTER.test(head) : false,
            text: status === 202 ? undefined : data.toString('utf8', 0, total),
        };
        const request = this.#request;
        this.#request = undefined;
        const close = CONNECTION_CLOSE.test(head);
        if (close) {
            // Open the next connection now instead of waiting for the server's FIN: the
            // server would close anyway, and a request written in between would be lost.
            socket.destroy();
            this.#open();
        }
        if (request !== undefined)
            this.#handler.response(this, res, request, this.#startedAt);
        if (!close && !this.#stopped && this.#socket === socket)
            this.#handler.ready(this);
    }
}
//# sourceMappingURL=http-client.js.map