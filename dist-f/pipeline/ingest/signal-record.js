/** The log's dedup id: JetStream's Nats-Msg-Id in the cluster deployment. */
export const signalDedupId = (sourceId, signalId) => `${sourceId}/${signalId}`;
export const encodeSignalRecord = (record) => Buffer.from(JSON.stringify(record));
export const decodeSignalRecord = (data) => JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
//# sourceMappingURL=signal-record.js.map