export { openJournal } from './log-journal.js';
export { replaceFileDurably } from './journal/durable-fs.js';
export { LogError, isLogError } from './log-error.js';
export { VerifyPool } from './verify/verify-pool.js';
export { IngestPipeline } from './ingest/ingest-pipeline.js';
export { IngestErrorLog } from './ingest/ingest-error-log.js';
export { decodeSignalRecord, signalDedupId } from './ingest/signal-record.js';
export { parseStrictJson } from './validate/strict-json.js';
export { parseIsoUtc } from './validate/iso-timestamp.js';
export { isValidSignalId } from './validate/signal-fields.js';
//# sourceMappingURL=index.js.map