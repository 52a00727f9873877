/** File helpers every stage that keeps state on disk uses: durable writes and checksums. */
export { isOutOfDescriptors, replaceFileDurably, syncDir, temporaryPathOf, unlinkIfPresent, writeFully } from './durable-fs.js'
export { crc32c } from './crc32c.js'
export { GroupCommit, type GroupCommitOptions } from './group-commit.js'
export { readUint53, writeUint53 } from './uint53.js'
