/**
 * Reads records across segments, from a seq or from a time. The per-segment summary
 * (first seq and time, last seq) picks the segment by binary search and the sparse
 * in-segment index picks the offset, so a read costs one short scan wherever it
 * starts in the log.
 */
import { open } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import type { LogRecord, ReadStart } from '../log.js'
import { ioError, LogError, retryableIoError } from '../log-error.js'
import { indexSegment, prefixLength, scanRecords } from './segment-file.js'
import type { IndexEntry, Segment } from './segment-file.js'

/** Covers the gap to the start point (one index interval) plus typical records. */
const READ_CHUNK_BYTES = 128 * 1024

/** Where recent reads of a segment stopped, newest last; a few readers may take turns. */
const RESUME_POINTS = 4

export class SegmentReader {
  readonly #segments: () => readonly Segment[]
  /**
   * A reader going through the log reads again from where its last read stopped. Resuming
   * there skips the search for the start and, in a sealed segment not indexed yet, the
   * scan of the whole segment that building its index costs (so damage in a sealed
   * segment is found when a read reaches it, not before). With more readers than
   * RESUME_POINTS in one segment, the oldest point goes and its reader searches again.
   */
  readonly #resume = new WeakMap<Segment, IndexEntry[]>()

  constructor(segments: () => readonly Segment[]) {
    this.#segments = segments
  }

  async read(start: ReadStart, max: number): Promise<LogRecord[]> {
    // A snapshot: a roll or a retention pass during the read does not disturb it.
    const segments = this.#segments().filter((s) => !s.empty)
    if (segments.length === 0) return []
    const out: LogRecord[] = []
    let i: number
    let fromSeq = 0
    let fromTime = 0
    if ('fromSeq' in start) {
      // Like JetStream's opt_start_seq: a start before the first record held means
      // "from the first record held".
      fromSeq = Math.max(start.fromSeq, segments[0]!.firstSeq)
      i = indexOfLast(segments, (s) => s.firstSeq <= fromSeq)
    } else {
      fromTime = start.fromTime
      // Times never decrease along the log, so the first record at or after
      // `fromTime` is in the last segment starting before it, or the next one.
      i = indexOfLast(segments, (s) => s.firstTime < fromTime)
    }
    for (; i < segments.length && out.length < max; i++) {
      const seg = segments[i]!
      // Durable extent now; records made durable after this point wait for the next read.
      const to = seg.size
      const lastSeq = seg.lastSeq
      if (fromSeq > lastSeq) continue
      const fh = await openSegment(seg)
      if (fh === undefined) continue // removed by retention while this read ran
      try {
        const entry =
          this.#resumePoint(seg, fromSeq, out.length === 0 && 'fromSeq' in start) ??
          (await startEntry(fh, seg, out.length === 0 ? start : { fromSeq: seg.firstSeq }, fromSeq))
        const res = await scanRecords(fh, {
          from: entry.offset,
          to,
          expectSeq: entry.seq,
          copyData: true,
          chunkBytes: READ_CHUNK_BYTES,
          visit: (rec) => {
            if (rec.seq < fromSeq || rec.time < fromTime) return true
            out.push(rec)
            return out.length < max
          },
        })
        if (res.problem !== undefined) throw corrupt(seg, res.end, res.problem)
        this.#noteResumePoint(seg, { seq: res.nextSeq, time: Number.NaN, offset: res.end })
      } catch (err) {
        throw err instanceof LogError ? err : ioError(`reading ${seg.path}`, err)
      } finally {
        await fh.close().catch(() => undefined)
      }
    }
    return out
  }

  /** Where a read from `fromSeq` can begin in `seg` because an earlier read stopped there. */
  #resumePoint(seg: Segment, fromSeq: number, fromSeqRead: boolean): IndexEntry | undefined {
    if (!fromSeqRead || fromSeq <= seg.firstSeq) return undefined
    return this.#resume.get(seg)?.find((p) => p.seq === fromSeq)
  }

  #noteResumePoint(seg: Segment, point: IndexEntry): void {
    // Kept also at the end of what the segment holds now: a reader tailing the active segment resumes there.
    const points = (this.#resume.get(seg) ?? []).filter((p) => p.seq !== point.seq)
    points.push(point)
    if (points.length > RESUME_POINTS) points.shift()
    this.#resume.set(seg, points)
  }
}

/** The index entry to begin scanning `seg` at, indexing the segment first if needed. */
async function startEntry(fh: FileHandle, seg: Segment, start: ReadStart, fromSeq: number): Promise<IndexEntry> {
  const first: IndexEntry = { seq: seg.firstSeq, time: seg.firstTime, offset: 0 }
  const wantsSeq = 'fromSeq' in start
  // Reading a segment from its start needs no index.
  if (wantsSeq ? fromSeq <= seg.firstSeq : start.fromTime <= seg.firstTime) return first
  if (seg.index === undefined) {
    seg.indexing ??= indexSegment(fh, seg).then((res) => {
      seg.indexing = undefined
      if (res.problem !== undefined) throw corrupt(seg, res.end, res.problem)
    })
    await seg.indexing
  }
  const entry = wantsSeq ? seg.entryForSeq(fromSeq) : seg.entryForTime(start.fromTime)
  return entry ?? first
}

async function openSegment(seg: Segment): Promise<FileHandle | undefined> {
  try {
    return await open(seg.path, 'r')
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw retryableIoError(`opening ${seg.path}`, err)
  }
}

function corrupt(seg: Segment, offset: number, problem: string): LogError {
  return new LogError('log_corrupt', `${seg.path} at byte ${offset}: ${problem}`)
}

/** Index of the last segment satisfying `pred` (a prefix property), or 0 if none. */
function indexOfLast(segments: readonly Segment[], pred: (s: Segment) => boolean): number {
  return Math.max(prefixLength(segments, pred) - 1, 0)
}
