export function packBatch(items) {
    const count = items.length;
    const keys = new Uint8Array(count * 32);
    const signatures = new Uint8Array(count * 64);
    const messageEnds = new Uint32Array(count);
    let total = 0;
    for (const item of items)
        total += item.message.length;
    const messages = new Uint8Array(total);
    let offset = 0;
    items.forEach((item, i) => {
        keys.set(item.publicKey.subarray(0, 32), i * 32);
        signatures.set(item.signature.subarray(0, 64), i * 64);
        messages.set(item.message, offset);
        offset += item.message.length;
        messageEnds[i] = offset;
    });
    return { count, keys: keys.buffer, signatures: signatures.buffer, messages: messages.buffer, messageEnds };
}
//# sourceMappingURL=verify-batch.js.map