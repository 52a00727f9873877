/**
 * The embedded signal log: an append-only journal of segment files in a local folder
 * (DESIGN section 2), behind the `SignalLog` contract of `./log.ts`.
 *
 * Durability stance (DESIGN section 5): with `fsync: 'always'` an append resolves only
 * after fdatasync of the batch that carried it, so a 202 survives a power cut; appends
 * are group-committed, so the sync cost is shared by every append that arrived while
 * the previous sync ran. 'interval' (resolve after write, sync on a timer) and 'never'
 * (the OS decides) survive a killed process, since the bytes are already in the kernel,
 * but not a power cut: 'interval' can lose up to `fsyncIntervalMs` of 202'd appends.
 * Segments are synced on every roll and at close whatever the policy.
 *
 * One process owns a journal folder at a time; opening the same folder twice in one
 * process is refused, across processes it is the deployment's job.
 */
import { open } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { AppendResult, LogInfo, LogRecord, ReadStart, SignalLog } from './log.js'
import { ConsumerPositions } from './journal/consumer-positions.js'
import { DedupIndex } from './journal/dedup-index.js'
import { GroupCommit } from '../storage/index.js'
import { fillJournalOptions } from './journal/journal-options.js'
import type { FilledJournalOptions, JournalOptions } from './journal/journal-options.js'
import { recoverJournal } from './journal/journal-recovery.js'
import { LogError } from './log-error.js'
import { encodeDedupId, encodeRecord, framedSize, MAX_RECORD_BYTES } from './journal/record-codec.js'
import { SegmentReader } from './journal/segment-reader.js'
import { SegmentWriter } from './journal/segment-writer.js'
import type { PendingRecord } from './journal/segment-writer.js'
import { SignalLogBase } from './journal/signal-log-base.js'

export type { JournalOptions } from './journal/journal-options.js'
export { JOURNAL_DEFAULTS } from './journal/journal-options.js'

/**
 * Largest batch written by one group commit. Big enough that the sync, not the copy,
 * dominates; small enough that a burst does not become one giant buffer.
 */
const MAX_BATCH_BYTES = 8 * 1024 * 1024

/** Folders open in this process: two writers on one journal would interleave records. */
const openDirs = new Set<string>()

/** Opens (creating if needed) the journal in `opts.dir`, recovering from a torn tail. */
export async function openJournal(opts: JournalOptions): Promise<SignalLog> {
  const log = new JournalLog(fillJournalOptions(opts))
  await log.open()
  return log
}

interface OpenState {
  readonly writer: SegmentWriter
  readonly reader: SegmentReader
  readonly commits: GroupCommit<PendingRecord>
  readonly dedup: DedupIndex
  readonly consumers: ConsumerPositions
  readonly timers: NodeJS.Timeout[]
  /** Highest seq handed out (durable or not). */
  lastSeq: number
  /** Newest record time handed out; record times never go below it. */
  lastTime: number
}

class JournalLog extends SignalLogBase {
  readonly #opts: FilledJournalOptions
  readonly #dirKey: string
  #s: OpenState | undefined

  constructor(opts: FilledJournalOptions) {
    super()
    this.#opts = opts
    this.#dirKey = resolve(opts.dir)
  }

  protected override async onOpen(): Promise<void> {
    if (openDirs.has(this.#dirKey)) {
      throw new LogError('invalid_argument', `journal folder ${this.#dirKey} is already open in this process`)
    }
    openDirs.add(this.#dirKey)
    try {
      await this.#openFiles()
    } catch (err) {
      openDirs.delete(this.#dirKey)
      throw err
    }
  }

  async #openFiles(): Promise<void> {
    const o = this.#opts
    const consumers = await ConsumerPositions.load(o.dir)
    const rec = await recoverJournal({
      dir: o.dir,
      dedupWindowMs: o.dedupWindowMs,
      maxSegments: o.maxSegments,
      now: o.now(),
      // Under 'always' only the batch being written can be unsynced at a crash (one
      // batch at a time, at most MAX_BATCH_BYTES, or a single larger record); otherwise
      // any amount can be.
      maxTornBytes: o.fsync === 'always' ? MAX_BATCH_BYTES + MAX_RECORD_BYTES : Number.POSITIVE_INFINITY,
    })
    if (rec.truncated !== undefined) o.onRepair(rec.truncated)
    const dedup = new DedupIndex(o.dedupWindowMs)
    for (const seed of rec.dedup) dedup.add(seed.id, seed.seq, seed.time)
    const writer = new SegmentWriter(
      { dir: o.dir, fsync: o.fsync, segmentBytes: o.segmentBytes, maxSegments: o.maxSegments, onWarning: o.onWarning },
      rec.segments,
      rec.activeHandle,
      await open(o.dir, 'r'),
    )
    const active = rec.segments[rec.segments.length - 1]!
    const s: OpenState = {
      writer,
      reader: new SegmentReader(() => writer.segments),
      commits: new GroupCommit<PendingRecord>({
        commit: (records) => writer.write(records),
        sizeOf: (r) => r.buf.length,
        maxBatchBytes: MAX_BATCH_BYTES,
      }),
      dedup,
      consumers,
      timers: [],
      lastSeq: active.lastSeq,
      lastTime: rec.lastTime,
    }
    if (o.fsync === 'interval') {
      // A failed sync poisons the writer, so the next append reports it.
      const t = setInterval(() => writer.sync().catch(() => undefined), o.fsyncIntervalMs)
      s.timers.push(t)
    }
    if (o.dedupWindowMs > 0) {
      // Lookups expire entries exactly; the sweep only returns memory, so a coarse
      // period is enough.
      const period = Math.min(Math.max(Math.floor(o.dedupWindowMs / 4), 100), 30_000)
      s.timers.push(setInterval(() => dedup.sweep(o.now()), period))
    }
    // Timers must never keep a process alive that has nothing else to do.
    for (const t of s.timers) t.unref()
    this.#s = s
  }

  protected override async onAppend(dedupId: string, data: Uint8Array): Promise<AppendResult> {
    const s = this.#s!
    const id = encodeDedupId(dedupId)
    // An empty id opts out of deduplication, as an absent Nats-Msg-Id does in JetStream.
    const dedupOn = dedupId !== '' && s.dedup.windowMs > 0
    if (dedupOn) {
      const first = s.dedup.get(dedupId, this.#opts.now())
      if (first !== undefined) {
        if (first.pending !== undefined) await first.pending
        return { seq: first.seq, duplicate: true }
      }
    }
    const size = framedSize(id.length, data.length)
    if (size > MAX_RECORD_BYTES) {
      throw new LogError('record_too_large', `record of ${size} bytes exceeds the ${MAX_RECORD_BYTES}-byte limit`)
    }
    // Wall clocks step backwards (NTP); record times must not, since reads from a time
    // and the dedup rebuild at open both rely on time order.
    const time = Math.max(Math.floor(this.#opts.now()), s.lastTime)
    const seq = s.lastSeq + 1
    const buf = encodeRecord(seq, time, id, data)
    s.lastSeq = seq
    s.lastTime = time
    const durable = s.commits.submit({ buf, seq, time })
    if (dedupOn) {
      const entry = s.dedup.add(dedupId, seq, time, durable)
      // Duplicates await `pending` and see the failure; nobody else may, so mark it handled.
      durable.then(() => { entry.pending = undefined }, () => undefined)
    }
    await durable
    return { seq, duplicate: false }
  }

  protected override onRead(start: ReadStart, max: number): Promise<LogRecord[]> {
    return this.#s!.reader.read(start, max)
  }

  protected override onInfo(): LogInfo {
    const segments = this.#s!.writer.segments
    const first = segments[0]!
    const last = segments[segments.length - 1]!
    const lastSeq = last.lastSeq
    const firstSeq = lastSeq >= first.firstSeq ? first.firstSeq : 0
    let bytes = 0
    for (const seg of segments) bytes += seg.size
    return { firstSeq, lastSeq, records: firstSeq === 0 ? 0 : lastSeq - firstSeq + 1, bytes }
  }

  protected override async onConsumerPosition(name: string): Promise<number> {
    return this.#s!.consumers.get(name)
  }

  protected override onAck(name: string, seq: number): Promise<void> {
    return this.#s!.consumers.set(name, seq)
  }

  protected override onSync(): Promise<void> {
    // Under 'always' every acknowledged append was synced before it was acknowledged.
    return this.#opts.fsync === 'always' ? Promise.resolve() : this.#s!.writer.sync()
  }

  protected override async onClose(): Promise<void> {
    const s = this.#s!
    try {
      for (const t of s.timers) clearInterval(t)
      await s.commits.drain()
      await s.consumers.drain()
      await s.writer.close()
    } finally {
      s.dedup.clear()
      openDirs.delete(this.#dirKey)
    }
  }
}
