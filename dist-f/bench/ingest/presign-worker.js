import { parentPort } from 'node:worker_threads';
import { creatorKeyFromSeed, signPush } from '../../sdk/signing.js';
/** A Solana mint that passes token validation (as in the integration tests). */
const TOKEN = 'So11111111111111111111111111111111111111112';
const keys = new Map();
function keyFor(source) {
    let key = keys.get(source.sourceId);
    if (key === undefined) {
        key = creatorKeyFromSeed(Buffer.from(source.seedBase64, 'base64'));
        keys.set(source.sourceId, key);
    }
    return key;
}
function requestBytes(job, i) {
    const source = job.sources[i % job.sources.length];
    const signed = signPush({
        sourceId: source.sourceId,
        keyId: source.keyId,
        key: keyFor(source),
        payload: {
            signal_id: `bench-${job.tag}-${i}`,
            source_id: source.sourceId,
            ts: new Date().toISOString(),
            token: TOKEN,
            severity: 'warning',
            confidence: 80,
            note: 'large transfer to a fresh wallet',
        },
    });
    let head = `POST ${signed.path} HTTP/1.1\r\nHost: 127.0.0.1:${job.port}\r\nContent-Length: ${signed.body.length}\r\n`;
    for (const [name, value] of Object.entries(signed.headers))
        head += `${name}: ${value}\r\n`;
    return Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), signed.body]);
}
function sign(job) {
    const parts = [];
    const ends = new Uint32Array(job.count);
    let size = 0;
    for (let n = 0; n < job.count; n++) {
        const bytes = requestBytes(job, job.first + n);
        parts.push(bytes);
        size += bytes.length;
        ends[n] = size;
    }
    const data = new Uint8Array(size);
    let offset = 0;
    for (const part of parts) {
        data.set(part, offset);
        offset += part.length;
    }
    return { data: data.buffer, ends };
}
parentPort?.on('message', (job) => {
    const chunk = sign(job);
    parentPort?.postMessage(chunk, [chunk.data, chunk.ends.buffer]);
});
//# sourceMappingURL=presign-worker.js.map