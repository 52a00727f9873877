/**
 * Opening the journal: find the segments, repair a torn tail, and collect the dedup
 * ids still inside the window.
 *
 * Only the last segment can be torn: the writer syncs a segment before it creates the
 * next one, so earlier segments are complete. A crash mid-write leaves the last
 * segment with a partial or garbled final batch; everything before the first record
 * that fails its length, magic, checksum or seq check was written by earlier batches.
 * Under fsync 'always' an append resolves only after its batch is synced and batches
 * are written in order, so every acknowledged record lies before that point and
 * truncating there never drops one. Truncating (rather than skipping the bad bytes)
 * matters: new appends must not land after garbage that a later scan would stop at.
 *
 * A crash can garble only what was not yet synced: under 'always' that is the last
 * batch. Valid records further than that past a bad one are not a torn tail but damage
 * to acknowledged data, and the start stops rather than cutting them away.
 */
import { mkdir, open, readdir } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { FileHandle } from 'node:fs/promises'
import { syncDir } from '../../storage/index.js'
import { ioError, LogError } from '../log-error.js'
import { decodeRecord, isRecordMagic } from './record-codec.js'
import { indexSegment, parseSegmentFileName, scanRecords, Segment } from './segment-file.js'

export interface DedupSeed {
  readonly id: string
  readonly seq: number
  readonly time: number
}

export interface RecoveredJournal {
  /** Oldest first; the last one is active and open in `activeHandle`. */
  readonly segments: Segment[]
  readonly activeHandle: FileHandle
  /** Time of the newest record, 0 when the log is empty. */
  readonly lastTime: number
  /** Ids inside the dedup window, oldest first. */
  readonly dedup: DedupSeed[]
  /** Set when a torn tail was cut off. */
  readonly truncated?: TornTail
}

/** What recovery cut from the end of the last segment. */
export interface TornTail {
  readonly path: string
  readonly offset: number
  /** Bytes cut. */
  readonly bytes: number
  readonly problem: string
  /** Records that still checked out among the bytes cut (written, never synced). */
  readonly validRecordsCut: number
}

export interface RecoveryOptions {
  readonly dir: string
  readonly dedupWindowMs: number
  readonly now: number
  /** Most bytes a crash can leave unsynced at the end (the last batch); past it a bad record is damage. */
  readonly maxTornBytes: number
}

export async function recoverJournal(opts: RecoveryOptions): Promise<RecoveredJournal> {
  const { dir } = opts
  const segments = await listSegments(opts)
  if (segments.length === 0) segments.push(await createFirstSegment(dir))

  for (let i = 0; i < segments.length - 1; i++) {
    await loadSealed(segments[i]!, segments[i + 1]!.firstSeq - 1)
  }

  const active = segments[segments.length - 1]!
  const inWindow = (time: number): boolean => opts.dedupWindowMs > 0 && opts.now - time < opts.dedupWindowMs
  const tailSeeds: DedupSeed[] = []
  const { handle, truncated } = await recoverTail(active, opts.maxTornBytes, (id, seq, time) => {
    if (id !== '' && inWindow(time)) tailSeeds.push({ id, seq, time })
  })

  try {
    const seeds: DedupSeed[][] = [tailSeeds]
    // Walk back only while a segment can still hold ids inside the window: times never
    // decrease, so the next segment's first time bounds this segment's last time.
    for (let i = segments.length - 2; i >= 0 && opts.dedupWindowMs > 0; i--) {
      const next = segments[i + 1]!
      if (!next.empty && !inWindow(next.firstTime)) break
      const found: DedupSeed[] = []
      await indexSealed(segments[i]!, (r) => {
        if (r.dedupId !== '' && inWindow(r.time)) found.push({ id: r.dedupId, seq: r.seq, time: r.time })
      })
      seeds.unshift(found)
    }
    // An empty active segment (a crash right after a roll) says nothing about the
    // newest time, which new records must not go below.
    const prev = segments[segments.length - 2]
    if (active.empty && prev !== undefined && prev.index === undefined) await indexSealed(prev)
    const newest = active.empty ? prev : active
    return {
      segments,
      activeHandle: handle,
      lastTime: newest === undefined || Number.isNaN(newest.lastTime) ? 0 : newest.lastTime,
      dedup: seeds.flat(),
      ...(truncated === undefined ? {} : { truncated }),
    }
  } catch (err) {
    await handle.close().catch(() => undefined)
    throw err
  }
}

async function listSegments(opts: RecoveryOptions): Promise<Segment[]> {
  let names: string[]
  try {
    const made = await mkdir(opts.dir, { recursive: true })
    // A folder just created must itself survive a power cut before files inside it count.
    if (made !== undefined) await syncDir(dirname(opts.dir))
    names = await readdir(opts.dir)
  } catch (err) {
    throw ioError(`opening the journal folder ${opts.dir}`, err)
  }
  const seqs = names.map(parseSegmentFileName).filter((s): s is number => s !== undefined)
  seqs.sort((a, b) => a - b)
  // Retention applies once the journal is open (the writer's pass), to what is found here.
  return seqs.map((seq) => new Segment(opts.dir, seq))
}

async function createFirstSegment(dir: string): Promise<Segment> {
  const seg = new Segment(dir, 1)
  try {
    const fh = await open(seg.path, 'wx')
    await fh.close()
    await syncDir(dir)
  } catch (err) {
    throw ioError(`creating ${seg.path}`, err)
  }
  return seg
}

/** A sealed segment: learn its size and first time; its last seq follows from the next name. */
async function loadSealed(seg: Segment, lastSeq: number): Promise<void> {
  await withHandle(seg, 'r', async (fh) => {
    seg.size = (await fh.stat()).size
    seg.lastSeq = lastSeq
    const res = await scanRecords(fh, {
      from: 0,
      to: seg.size,
      expectSeq: seg.firstSeq,
      copyData: false,
      // Only the first record is wanted: do not read a megabyte of each segment for it.
      chunkBytes: 4096,
      visit: (r) => {
        seg.firstTime = r.time
        return false
      },
    })
    if (!res.stopped || lastSeq < seg.firstSeq) {
      throw new LogError('log_corrupt', `${seg.path}: sealed segment has no valid first record (${res.problem ?? 'empty'})`)
    }
  })
}

async function indexSealed(seg: Segment, visit?: Parameters<typeof indexSegment>[2]): Promise<void> {
  await withHandle(seg, 'r', async (fh) => {
    const res = await indexSegment(fh, seg, visit)
    if (res.problem !== undefined) {
      throw new LogError('log_corrupt', `${seg.path} at byte ${res.end}: ${res.problem}`)
    }
  })
}

/** Scans the last segment, cutting it at the first bad record. Returns it open for appends. */
async function recoverTail(
  seg: Segment,
  maxTornBytes: number,
  visit: (id: string, seq: number, time: number) => void,
): Promise<{ handle: FileHandle; truncated?: TornTail }> {
  let fh: FileHandle
  try {
    fh = await open(seg.path, 'r+')
  } catch (err) {
    throw ioError(`opening ${seg.path}`, err)
  }
  try {
    const fileSize = (await fh.stat()).size
    seg.beginIndex()
    const res = await scanRecords(fh, {
      from: 0,
      to: fileSize,
      expectSeq: seg.firstSeq,
      copyData: false,
      visit: (r, offset, size) => {
        seg.noteRecord(r.seq, r.time, offset, size)
        visit(r.dedupId, r.seq, r.time)
      },
    })
    let truncated: TornTail | undefined
    if (res.end !== fileSize) {
      const problem = res.problem ?? 'trailing bytes'
      const after = await validRecordsAfter(fh, res.end, fileSize)
      if (after.count > 0 && after.end - res.end > maxTornBytes) {
        throw new LogError(
          'log_corrupt',
          `${seg.path}: bad record at byte ${res.end} (${problem}), followed by ${after.count} valid records up to byte ${after.end}: ` +
            'more than a crash can leave unsynced, so this is damage to acknowledged records, not a torn tail. Nothing was cut; ' +
            'restore the file from a copy, or move the bytes after the bad record aside to start without them',
        )
      }
      await fh.truncate(res.end)
      truncated = { path: seg.path, offset: res.end, bytes: fileSize - res.end, problem, validRecordsCut: after.count }
    }
    // Synced whether or not it was cut: the cut must be on disk before new records follow
    // it, and records written before a crash but never synced (their clients got no 202)
    // are kept and answered as deduplicated on a retry, which promises durability.
    await fh.datasync()
    return truncated === undefined ? { handle: fh } : { handle: fh, truncated }
  } catch (err) {
    await fh.close().catch(() => undefined)
    throw err instanceof LogError ? err : ioError(`recovering ${seg.path}`, err)
  }
}

/**
 * Records that check out (magic, length, checksum) in `[from, to)`, found by trying
 * every offset that starts with the magic: after a bad record its successors' offsets
 * are unknown. Runs only when recovery found a bad record, over the rest of one segment.
 */
async function validRecordsAfter(fh: FileHandle, from: number, to: number): Promise<{ count: number; end: number }> {
  const buf = Buffer.allocUnsafe(to - from)
  const { bytesRead } = await fh.read(buf, 0, buf.length, from)
  let count = 0
  let end = from
  for (let off = 1; off + 4 <= bytesRead; off++) {
    if (!isRecordMagic(buf, off)) continue
    const res = decodeRecord(buf, off, bytesRead, false)
    if (res.kind !== 'record') continue
    count++
    end = from + off + res.size
    off += res.size - 1
  }
  return { count, end }
}

async function withHandle(seg: Segment, flags: string, op: (fh: FileHandle) => Promise<void>): Promise<void> {
  let fh: FileHandle
  try {
    fh = await open(seg.path, flags)
  } catch (err) {
    throw ioError(`opening ${seg.path}`, err)
  }
  try {
    await op(fh)
  } catch (err) {
    throw ioError(`reading ${seg.path}`, err)
  } finally {
    await fh.close().catch(() => undefined)
  }
}
