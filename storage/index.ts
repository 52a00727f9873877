/** File helpers every stage that keeps state on disk uses (durable writes, checksums), and the key-value port with its file adapter. */
export { isOutOfDescriptors, replaceFileDurably, syncDir, temporaryPathOf, unlinkIfPresent, writeFully } from './durable-fs.js'
export { crc32c } from './crc32c.js'
export { GroupCommit, type GroupCommitOptions } from './group-commit.js'
export { readUint53, writeUint53 } from './uint53.js'
export { checkKey, isKvError, KV_LIMITS, KvError } from './kv-store.js'
export type { KvBucket, KvBucketLimits, KvBucketStatus, KvEntry, KvErrorCode, KvWatcher, KvWatchEntry, KvWatchOptions, OpenKvBucket } from './kv-store.js'
export { fileKvBuckets, type FileKvOptions } from './kv-file.js'
export { natsKvBuckets, type NatsKvOptions } from './kv-nats.js'
