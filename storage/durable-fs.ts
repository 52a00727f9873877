/**
 * File-system steps whose order is what makes a change survive a power cut.
 */
import { writeSync } from 'node:fs'
import { open, rename, unlink } from 'node:fs/promises'

/**
 * A new, renamed or deleted file is only durable once its directory is synced: the
 * file's own fsync covers its contents, not the directory entry naming it.
 */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r')
  try {
    await fh.sync()
  } finally {
    await fh.close()
  }
}

/**
 * `write(2)` may write less than asked (a full disk, a signal): loop until done. On the
 * calling thread: the writes here (a group of journal records, the registry file) are
 * small enough that a thread-pool round trip would cost more than the copy.
 */
export function writeFully(fd: number, buf: Uint8Array, position: number): void {
  let done = 0
  while (done < buf.length) {
    const bytesWritten = writeSync(fd, buf, done, buf.length - done, position + done)
    if (bytesWritten <= 0) throw new Error('write made no progress')
    done += bytesWritten
  }
}

/** Where replaceFileDurably writes before it renames: a crash can leave the file there. */
export function temporaryPathOf(path: string): string {
  return `${path}.tmp`
}

/**
 * Replaces `path` atomically: a reader (or a restart) sees the old content or the new,
 * never a half-written file. Write a temporary, sync it, rename over, sync the folder.
 * `data` may come in pieces, also produced while it is written (an async iterable), so
 * a large file need not be held whole in memory first. Should the pieces fail, the
 * temporary is removed and `path` left as it was.
 */
export async function replaceFileDurably(
  path: string,
  dir: string,
  data: Uint8Array | Iterable<Uint8Array> | AsyncIterable<Uint8Array>,
  mode = 0o644,
): Promise<void> {
  const tmp = temporaryPathOf(path)
  const fh = await open(tmp, 'w', mode)
  try {
    try {
      let position = 0
      for await (const piece of data instanceof Uint8Array ? [data] : data) {
        writeFully(fh.fd, piece, position)
        position += piece.length
      }
      await fh.sync()
    } finally {
      await fh.close()
    }
    await rename(tmp, path)
  } catch (err) {
    await unlinkIfPresent(tmp).catch(() => undefined)
    throw err
  }
  await syncDir(dir)
}

export async function unlinkIfPresent(path: string): Promise<void> {
  try {
    await unlink(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
}

/**
 * The process (EMFILE) or the system (ENFILE) has no file descriptor left, as a flood of
 * connections can cause: it passes once they close, so it is worth a retry, not a stop.
 * Looks through `cause` too, where a wrapping error keeps it.
 */
export function isOutOfDescriptors(err: unknown): boolean {
  for (let e = err, depth = 0; e !== null && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code
    if (code === 'EMFILE' || code === 'ENFILE') return true
  }
  return false
}
