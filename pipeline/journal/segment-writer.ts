/**
 * Writes batches of framed records to the active segment, rolls segments and applies
 * retention. Every file operation runs in one serial chain, so a batch write, the
 * interval sync, a roll and the final close never overlap on a handle.
 *
 * After any failed write or sync the writer refuses all further work: after a failed
 * fsync Linux may already have dropped the dirty pages, so retrying would report
 * durability that does not exist (the PostgreSQL "fsyncgate" lesson). Reopening the
 * journal recovers from what is really on disk.
 */
import { open } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import type { FsyncPolicy, LogRecord } from '../log.js'
import { isOutOfDescriptors, unlinkIfPresent, writeFully } from '../../storage/index.js'
import { ioError, LogError } from '../log-error.js'
import { Segment } from './segment-file.js'

export interface PendingRecord {
  readonly buf: Buffer
  readonly seq: number
  readonly time: number
  /** The record decoded, for readers served from memory (see tail-ring.ts). */
  readonly record: LogRecord
}

/** How many of the oldest segments retention removes now; the active (last) one is never removed. */
export type RetentionRule = (segments: readonly Segment[]) => number

export interface SegmentWriterOptions {
  readonly dir: string
  readonly fsync: FsyncPolicy
  readonly segmentBytes: number
  /** Applied after every roll and by `retain`. */
  readonly retention: RetentionRule
  /** A roll put off for want of a file descriptor (see `#roll`); at most one line per 10 s. */
  readonly onWarning?: (message: string, err: unknown) => void
  /**
   * Told of each group in the same synchronous step that publishes it to readers (durable
   * per policy by then), so what it keeps of them is never ahead of, nor behind, the files.
   */
  readonly onPublished?: (group: readonly PendingRecord[]) => void
}

/** How far past `segmentBytes` the active segment may grow while no new file can be opened. */
const DEFERRED_ROLL_FACTOR = 2

export class SegmentWriter {
  readonly #opts: SegmentWriterOptions
  /** Oldest first; the last one is active. Replaced, never mutated, so readers can snapshot it. */
  #segments: readonly Segment[]
  #fh: FileHandle
  #chain: Promise<unknown> = Promise.resolve()
  /** Written but not yet synced bytes exist (policies other than 'always'). */
  #dirty = false
  #failure: LogError | undefined
  #closed = false
  /**
   * The journal's folder, held open from the start: syncing it after a roll must not
   * need a new descriptor, which a flood of connections can leave none of.
   */
  readonly #dirFh: FileHandle
  #warnedAt = Number.NEGATIVE_INFINITY

  constructor(opts: SegmentWriterOptions, segments: readonly Segment[], activeHandle: FileHandle, dirHandle: FileHandle) {
    this.#opts = opts
    this.#segments = segments
    this.#fh = activeHandle
    this.#dirFh = dirHandle
  }

  get segments(): readonly Segment[] {
    return this.#segments
  }

  get #active(): Segment {
    return this.#segments[this.#segments.length - 1]!
  }

  /**
   * Appends the records (in seq order) and makes them durable per policy. Segment
   * metadata moves forward only afterwards, which is what publishes them to readers.
   */
  write(records: readonly PendingRecord[]): Promise<void> {
    return this.#serial(async () => {
      let group: PendingRecord[] = []
      let groupBytes = 0
      // Once put off, the roll is tried again by the next write, not by every record.
      let rollPutOff = false
      for (const rec of records) {
        const used = this.#active.size + groupBytes
        if (used > 0 && used + rec.buf.length > this.#opts.segmentBytes * (rollPutOff ? DEFERRED_ROLL_FACTOR : 1)) {
          await this.#writeGroup(group, groupBytes, true)
          group = []
          groupBytes = 0
          rollPutOff = !(await this.#roll(rec.seq))
        }
        group.push(rec)
        groupBytes += rec.buf.length
      }
      await this.#writeGroup(group, groupBytes, this.#opts.fsync === 'always')
    })
  }

  /** For the 'interval' policy's timer: syncs what was written since the last sync. */
  sync(): Promise<void> {
    return this.#serial(async () => {
      if (!this.#dirty) return
      this.#dirty = false
      await this.#guard('syncing the active segment', () => this.#fh.datasync())
    })
  }

  /** Syncs what is left and closes the active segment. Later calls are no-ops. */
  close(): Promise<void> {
    return this.#serial(async () => {
      if (this.#closed) return
      this.#closed = true
      try {
        if (this.#dirty && this.#failure === undefined) {
          this.#dirty = false
          await this.#guard('syncing the active segment at close', () => this.#fh.datasync())
        }
      } finally {
        await this.#fh.close().catch(() => undefined)
        await this.#dirFh.close().catch(() => undefined)
      }
    }, true)
  }

  async #writeGroup(group: PendingRecord[], bytes: number, sync: boolean): Promise<void> {
    if (group.length === 0) return
    const active = this.#active
    const start = active.size
    // One write(2) for the whole group: the batch is what makes group commit pay off.
    const buf = group.length === 1 ? group[0]!.buf : Buffer.concat(group.map((r) => r.buf), bytes)
    await this.#guard('writing to the active segment', async () => {
      // write(2) runs here, on the event loop, and only the fdatasync goes to the thread
      // pool, as Redis does with its append-only file: copying a group of records into
      // the page cache takes microseconds, less than the hop to a pool thread and back,
      // and each hop is a wake-up that waits for a core on a busy machine (half-peak p99
      // 17.4 → 14.8 ms in four paired runs). The price: a write that blocks (a disk so
      // slow that the kernel throttles dirty pages) stalls the whole edge, shedding
      // included, where before only appends waited.
      writeFully(this.#fh.fd, buf, start)
      if (sync) {
        // fdatasync, not fsync: it still flushes the file size the new records need
        // in order to be read back, but skips the mtime update, one less metadata write.
        await this.#fh.datasync()
      }
    })
    if (!sync) this.#dirty = true
    let offset = start
    for (const rec of group) {
      active.noteRecord(rec.seq, rec.time, offset, rec.buf.length)
      offset += rec.buf.length
    }
    this.#opts.onPublished?.(group)
  }

  /**
   * Seals the active segment and starts one at `firstSeq`. The old segment was synced
   * just before (whatever the policy), so a segment never exists on disk unless its
   * predecessor is complete: recovery then only ever needs to repair the last one.
   *
   * False when the new file could not be opened for want of a descriptor (EMFILE,
   * ENFILE: a flood of connections took them all). That passes, and is no reason to
   * stop the log: the active segment takes the records until it is DEFERRED_ROLL_FACTOR
   * times its size, and the next write tries again. Past that it is a failure, as is
   * any other error.
   */
  async #roll(firstSeq: number): Promise<boolean> {
    const next = new Segment(this.#opts.dir, firstSeq)
    next.beginIndex()
    let opened = true
    await this.#guard('rolling to a new segment', async () => {
      if (this.#dirty) await this.#fh.datasync()
      this.#dirty = false
      const fh = await open(next.path, 'wx+').catch((err: unknown) => {
        if (!isOutOfDescriptors(err) || this.#active.size >= this.#opts.segmentBytes * DEFERRED_ROLL_FACTOR) throw err
        opened = false
        this.#warnNow('signal log: no file descriptor for a new segment; the active one takes the records meanwhile', err)
        return undefined
      })
      if (fh === undefined) return
      await this.#fh.close().catch(() => undefined)
      this.#fh = fh
      // The new file's name must survive a power cut along with the records in it.
      await this.#dirFh.sync()
    })
    if (!opened) return false
    this.#segments = [...this.#segments, next]
    await this.#dropOldest(this.#opts.retention)
    return true
  }

  /**
   * Applies `rule` (the configured retention by default) now, in turn with writes and
   * rolls. Resolves with the segments removed, oldest first.
   */
  retain(rule: RetentionRule = this.#opts.retention): Promise<readonly Segment[]> {
    let removed: readonly Segment[] = []
    return this.#serial(async () => {
      removed = await this.#dropOldest(rule)
    }).then(() => removed)
  }

  /**
   * Removes whole sealed segments from the oldest. Each is taken out of the list readers
   * snapshot before its file goes, so a new read never starts in it; a read already in it
   * keeps its open handle, and one about to open it finds it gone and moves on (a consumer
   * sees the jump in seqs and reports the loss). A segment whose file cannot be removed
   * stops the pass with it and every newer one kept: the held segments must stay
   * contiguous, or the next open would take a gap for damage. Retried by the next pass.
   */
  async #dropOldest(rule: RetentionRule): Promise<readonly Segment[]> {
    const want = Math.min(rule(this.#segments), this.#segments.length - 1)
    const removed: Segment[] = []
    for (let i = 0; i < want; i++) {
      const seg = this.#segments[0]!
      this.#segments = this.#segments.slice(1)
      try {
        await unlinkIfPresent(seg.path)
      } catch (err) {
        this.#segments = [seg, ...this.#segments]
        this.#warnNow(`signal log: could not remove ${seg.path} past retention; kept until the next pass`, err)
        break
      }
      removed.push(seg)
    }
    return removed
  }

  #warnNow(message: string, err: unknown): void {
    const now = performance.now()
    if (now - this.#warnedAt < 10_000) return
    this.#warnedAt = now
    this.#opts.onWarning?.(message, err)
  }

  async #guard(what: string, op: () => Promise<void>): Promise<void> {
    try {
      await op()
    } catch (err) {
      this.#failure ??= ioError(what, err)
      throw this.#failure
    }
  }

  #serial(op: () => Promise<void>, evenIfBroken = false): Promise<void> {
    const run = this.#chain.then(() => {
      if (this.#closed && !evenIfBroken) throw new LogError('log_closed', 'signal log is closed')
      if (this.#failure !== undefined && !evenIfBroken) throw this.#failure
      return op()
    })
    this.#chain = run.catch(() => undefined)
    return run
  }
}
