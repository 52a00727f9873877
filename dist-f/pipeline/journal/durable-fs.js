/**
 * File-system steps whose order is what makes a change survive a power cut.
 */
import { writeSync } from 'node:fs';
import { open, rename, unlink } from 'node:fs/promises';
/**
 * A new, renamed or deleted file is only durable once its directory is synced: the
 * file's own fsync covers its contents, not the directory entry naming it.
 */
export async function syncDir(dir) {
    const fh = await open(dir, 'r');
    try {
        await fh.sync();
    }
    finally {
        await fh.close();
    }
}
/** `write(2)` may write less than asked (a full disk, a signal): loop until done. */
export async function writeFully(fh, buf, position) {
    let done = 0;
    while (done < buf.length) {
        const { bytesWritten } = await fh.write(buf, done, buf.length - done, position + done);
        if (bytesWritten <= 0)
            throw new Error('write made no progress');
        done += bytesWritten;
    }
}
/** `writeFully` on the calling thread, for writes small enough to beat a thread-pool round trip. */
export function writeFullySync(fd, buf, position) {
    let done = 0;
    while (done < buf.length) {
        const bytesWritten = writeSync(fd, buf, done, buf.length - done, position + done);
        if (bytesWritten <= 0)
            throw new Error('write made no progress');
        done += bytesWritten;
    }
}
/**
 * Replaces `path` atomically: a reader (or a restart) sees the old content or the new,
 * never a half-written file. Write a temporary, sync it, rename over, sync the folder.
 */
export async function replaceFileDurably(path, dir, data, mode = 0o644) {
    const tmp = `${path}.tmp`;
    const fh = await open(tmp, 'w', mode);
    try {
        await writeFully(fh, data, 0);
        await fh.sync();
    }
    finally {
        await fh.close();
    }
    await rename(tmp, path);
    await syncDir(dir);
}
export async function unlinkIfPresent(path) {
    try {
        await unlink(path);
    }
    catch (err) {
        if (err.code !== 'ENOENT')
            throw err;
    }
}
//# sourceMappingURL=durable-fs.js.map