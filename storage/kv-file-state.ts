import { readFile } from 'node:fs/promises'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { decodeFrame, encodeFrame, OP_DEL, OP_MARK, OP_PUT, validFrameAfter, type StoredChange } from './kv-frame.js'
import { KvError } from './kv-store.js'

/** Entries per snapshot frame, with a turn of the event loop after each. */
const ENTRIES_PER_FRAME = 1000

/** A value as the file bucket holds it in memory. */
export interface Held {
  readonly revision: number
  readonly created: number
  readonly value: Uint8Array
}

export interface BucketFiles {
  /** The bucket's revision: the snapshot's mark, or the last change after it. */
  readonly revision: number
  readonly snapshotBytes: number
  /** Bytes of whole frames at the start of the change log: where the next frame goes. */
  readonly logBytes: number
  /** Bytes after them that a crash tore (never acknowledged), to be cut off. */
  readonly tornBytes: number
}

/**
 * Reads a bucket's snapshot and change log into `values`. Changes whose revision the
 * snapshot covers are skipped (a crash between a snapshot's rename and the log's
 * emptying leaves them). KvError `corrupt` for damage that is not a torn tail.
 */
export async function readBucketFiles(snapshotPath: string, logPath: string, values: Map<string, Held>): Promise<BucketFiles> {
  const snapshot = await readIfPresent(snapshotPath)
  let snapshotRevision = 0
  if (snapshot !== undefined) {
    // Written whole and renamed into place: any damage in it is damage, never a torn tail.
    for (let at = 0; at < snapshot.length; ) {
      const frame = decodeFrame(snapshot, at)
      if (frame.kind !== 'frame') throw new KvError('corrupt', `${snapshotPath}: damaged at byte ${at}`)
      for (const c of frame.changes) {
        if (c.op === OP_MARK) snapshotRevision = c.revision
        else values.set(c.key, { revision: c.revision, created: c.time, value: c.value })
      }
      at += frame.size
    }
  }
  let revision = snapshotRevision
  const log = await readIfPresent(logPath)
  let at = 0
  while (log !== undefined && at < log.length) {
    const frame = decodeFrame(log, at)
    if (frame.kind !== 'frame') {
      if (frame.kind === 'invalid' && validFrameAfter(log, at)) throw new KvError('corrupt', `${logPath}: damaged frame at byte ${at} (${frame.reason}) with frames after it`)
      break
    }
    for (const c of frame.changes) {
      if (c.revision <= snapshotRevision) continue
      if (c.op === OP_DEL) values.delete(c.key)
      else if (c.op === OP_PUT) values.set(c.key, { revision: c.revision, created: c.time, value: c.value })
      revision = Math.max(revision, c.revision)
    }
    at += frame.size
  }
  return { revision, snapshotBytes: snapshot?.length ?? 0, logBytes: at, tornBytes: (log?.length ?? 0) - at }
}

/**
 * The snapshot of `values` at `revision`, in frames: a mark holding the revision (which
 * deletions may have taken past every value's), then the values, ENTRIES_PER_FRAME per
 * frame with a turn of the event loop after each. Adds the bytes produced to `written`.
 */
export async function* snapshotFrames(values: Map<string, Held>, revision: number, written: { bytes: number }): AsyncGenerator<Buffer> {
  const mark = encodeFrame([{ op: OP_MARK, revision, time: 0, key: '', value: new Uint8Array(0) }])
  written.bytes += mark.length
  yield mark
  let group: StoredChange[] = []
  for (const [key, held] of values) {
    group.push({ op: OP_PUT, revision: held.revision, time: held.created, key, value: held.value })
    if (group.length === ENTRIES_PER_FRAME) {
      const frame = encodeFrame(group)
      written.bytes += frame.length
      yield frame
      group = []
      await yieldToLoop()
    }
  }
  if (group.length > 0) {
    const frame = encodeFrame(group)
    written.bytes += frame.length
    yield frame
  }
}

async function readIfPresent(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}
