/**
 * The embedded signal log (the default deployment, no outside server): an append-only
 * journal of segment files in a local folder, behind the `SignalLog` contract of
 * `./log.ts`.
 *
 * Durability stance: with `fsync: 'always'` an append resolves only after fdatasync of
 * the batch that carried it, so a 202 survives a power cut; appends are
 * group-committed, so the sync cost is shared by every append that arrived while the
 * previous sync ran. 'interval' (resolve after write, sync on a timer) and 'never' (the
 * OS decides) survive a killed process, since the bytes are already in the kernel, but
 * not a power cut: 'interval' can lose up to `fsyncIntervalMs` of 202'd appends.
 * Segments are synced on every roll and at close whatever the policy.
 *
 * Consumers see a record once its append could resolve: the writer publishes records
 * to readers only after the write (and, under 'always', the sync) that the append waits
 * for, and each group commit then wakes the fetches waiting for it. Under the relaxed
 * policies a consumer can thus see a record a power cut takes back, as its client got a
 * 202 for it; a stored consumer position never points past what the log kept, since the
 * log is synced before positions are written.
 *
 * The last records published are also kept in memory (journal/tail-ring.ts: 8 MiB or
 * 16,384 records by default), and reads from a seq they cover, which is every fetch of a
 * consumer that follows the log's end, are served from there instead of the files. They
 * enter it in the same step that publishes them to the files' readers, so the rule above
 * holds for them alike.
 *
 * Retention (by age, by size, see journal-options.ts) removes whole sealed segments,
 * after every roll, once a minute, and at open; the active segment is never removed.
 *
 * One process owns a journal folder at a time; opening the same folder twice in one
 * process is refused, across processes it is the deployment's job.
 */
import { open } from 'node:fs/promises'
import { resolve } from 'node:path'
import type { AppendResult, ConsumerInfo, LogConsumer, LogInfo, LogRecord, ReadStart, SignalLog } from './log.js'
import { ConsumerPositions } from './journal/consumer-positions.js'
import { DedupIndex } from './journal/dedup-index.js'
import { GroupCommit } from '../storage/index.js'
import { JournalConsumer } from './journal/journal-consumer.js'
import { fillJournalOptions } from './journal/journal-options.js'
import type { FilledJournalOptions, JournalOptions } from './journal/journal-options.js'
import { recoverJournal } from './journal/journal-recovery.js'
import { LogError } from './log-error.js'
import { encodeDedupId, encodeRecord, encodeSourceId, framedSize, MAX_RECORD_BYTES } from './journal/record-codec.js'
import { AppendWaiters } from './journal/append-waiters.js'
import { retentionRule } from './journal/retention.js'
import type { Segment } from './journal/segment-file.js'
import { SegmentReader } from './journal/segment-reader.js'
import { SegmentWriter } from './journal/segment-writer.js'
import type { PendingRecord } from './journal/segment-writer.js'
import { SignalLogBase } from './journal/signal-log-base.js'
import { copiesOf, TailRing } from './journal/tail-ring.js'

export type { JournalOptions } from './journal/journal-options.js'
export { JOURNAL_DEFAULTS } from './journal/journal-options.js'

/**
 * Largest batch written by one group commit. Big enough that the sync, not the copy,
 * dominates; small enough that a burst does not become one giant buffer.
 */
const MAX_BATCH_BYTES = 8 * 1024 * 1024

/** Folders open in this process: two writers on one journal would interleave records. */
const openDirs = new Set<string>()

/** How often retention looks for segments past their age while nothing rolls. */
const RETENTION_CHECK_MS = 60_000

/** What one retention pass removed. */
export interface RetentionReport {
  readonly segments: number
  /** Seqs of the records removed, when any were: `fromSeq` to `toSeq`. */
  readonly fromSeq: number
  readonly toSeq: number
  readonly bytes: number
}

/** The journal: the `SignalLog` contract, plus the retention controls of a local log. */
export interface Journal extends SignalLog {
  /** Applies the configured retention now (it also runs after rolls, once a minute, and at open). */
  enforceRetention(): Promise<RetentionReport>
  /**
   * Removes the whole sealed segments that hold only records before `beforeSeq`
   * (JetStream: purge with `seq`); records of a segment that also holds later ones stay.
   */
  purge(beforeSeq: number): Promise<RetentionReport>
}

/** Opens (creating if needed) the journal in `opts.dir`, recovering from a torn tail. */
export async function openJournal(opts: JournalOptions): Promise<Journal> {
  const log = new JournalLog(fillJournalOptions(opts))
  await log.open()
  return log
}

interface OpenState {
  readonly writer: SegmentWriter
  readonly reader: SegmentReader
  /** The records published last, for reads at the log's end. */
  readonly ring: TailRing
  readonly commits: GroupCommit<PendingRecord>
  readonly dedup: DedupIndex
  readonly consumers: ConsumerPositions
  /** Consumers open in this process, by name; null while one is being opened. */
  readonly open: Map<string, JournalConsumer | null>
  readonly waiters: AppendWaiters
  readonly timers: NodeJS.Timeout[]
  /** Highest seq handed out (durable or not). */
  lastSeq: number
  /** Newest record time handed out; record times never go below it. */
  lastTime: number
}

class JournalLog extends SignalLogBase implements Journal {
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
    const consumers = await ConsumerPositions.load(o.dir, () => this.#syncForPositions())
    const rec = await recoverJournal({
      dir: o.dir,
      dedupWindowMs: o.dedupWindowMs,
      now: o.now(),
      // Under 'always' only the batch being written can be unsynced at a crash (one
      // batch at a time, at most MAX_BATCH_BYTES, or a single larger record); otherwise
      // any amount can be.
      maxTornBytes: o.fsync === 'always' ? MAX_BATCH_BYTES + MAX_RECORD_BYTES : Number.POSITIVE_INFINITY,
    })
    if (rec.truncated !== undefined) o.onRepair(rec.truncated)
    const dedup = new DedupIndex(o.dedupWindowMs)
    for (const seed of rec.dedup) dedup.add(seed.id, seed.seq, seed.time)
    const active = rec.segments[rec.segments.length - 1]!
    const ring = new TailRing(active.lastSeq, o.tailCacheBytes, o.tailCacheRecords)
    const writer = new SegmentWriter(
      {
        dir: o.dir,
        fsync: o.fsync,
        segmentBytes: o.segmentBytes,
        retention: retentionRule(o),
        onWarning: o.onWarning,
        onPublished: (group) => {
          for (const p of group) ring.push(p.record)
        },
      },
      rec.segments,
      rec.activeHandle,
      await open(o.dir, 'r'),
    )
    const waiters = new AppendWaiters()
    const s: OpenState = {
      writer,
      reader: new SegmentReader(() => writer.segments),
      ring,
      commits: new GroupCommit<PendingRecord>({
        // Woken only once the batch is published to readers, that is durable per policy.
        commit: (records) => writer.write(records).then(() => waiters.wake(lastSeqOf(writer.segments))),
        sizeOf: (r) => r.buf.length,
        maxBatchBytes: MAX_BATCH_BYTES,
      }),
      dedup,
      consumers,
      open: new Map(),
      waiters,
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
    // Retention: segments age out while nothing rolls. A failed pass is retried by the next.
    s.timers.push(setInterval(() => void writer.retain().catch(() => undefined), RETENTION_CHECK_MS))
    // Timers must never keep a process alive that has nothing else to do.
    for (const t of s.timers) t.unref()
    this.#s = s
    try {
      // What aged out while the journal was closed, and files a crash kept from removal.
      await writer.retain()
    } catch (err) {
      this.#s = undefined
      for (const t of s.timers) clearInterval(t)
      await writer.close().catch(() => undefined)
      throw err
    }
  }

  /** Under a relaxed policy a position must not reach disk before the records it covers. */
  #syncForPositions(): Promise<void> {
    const s = this.#s
    return this.#opts.fsync === 'always' || s === undefined ? Promise.resolve() : s.writer.sync()
  }

  enforceRetention(): Promise<RetentionReport> {
    return this.run(async () => report(await this.#s!.writer.retain()))
  }

  purge(beforeSeq: number): Promise<RetentionReport> {
    return this.run(async () => {
      if (!Number.isSafeInteger(beforeSeq) || beforeSeq < 0) throw new LogError('invalid_argument', 'purge seq must be a non-negative integer')
      return report(await this.#s!.writer.retain((segments) => {
        let n = 0
        while (n < segments.length - 1 && segments[n + 1]!.firstSeq <= beforeSeq) n++
        return n
      }))
    })
  }

  protected override async onAppend(dedupId: string, data: Uint8Array, sourceId: string): Promise<AppendResult> {
    const s = this.#s!
    const id = encodeDedupId(dedupId)
    const source = encodeSourceId(sourceId)
    // An empty id opts out of deduplication, as an absent Nats-Msg-Id does in JetStream.
    const dedupOn = dedupId !== '' && s.dedup.windowMs > 0
    if (dedupOn) {
      const first = s.dedup.get(dedupId, this.#opts.now())
      if (first !== undefined) {
        if (first.pending !== undefined) await first.pending
        return { seq: first.seq, duplicate: true }
      }
    }
    const size = framedSize(id.length, data.length, source.length)
    if (size > MAX_RECORD_BYTES) {
      throw new LogError('record_too_large', `record of ${size} bytes exceeds the ${MAX_RECORD_BYTES}-byte limit`)
    }
    // Wall clocks step backwards (NTP); record times must not, since reads from a time
    // and the dedup rebuild at open both rely on time order.
    const time = Math.max(Math.floor(this.#opts.now()), s.lastTime)
    const seq = s.lastSeq + 1
    const buf = encodeRecord(seq, time, id, data, source)
    s.lastSeq = seq
    s.lastTime = time
    const durable = s.commits.submit({ buf, seq, time, record: s.ring.hold(seq, time, dedupId, sourceId, data) })
    if (dedupOn) {
      const entry = s.dedup.add(dedupId, seq, time, durable)
      // Duplicates await `pending` and see the failure; nobody else may, so mark it handled.
      durable.then(() => { entry.pending = undefined }, () => undefined)
    }
    await durable
    return { seq, duplicate: false }
  }

  protected override onRead(start: ReadStart, max: number): Promise<LogRecord[]> {
    return 'fromSeq' in start ? this.#readFrom(start.fromSeq, max, null) : this.#s!.reader.read(start, max)
  }

  /**
   * Up to `max` records from the first held at or after `fromSeq`: from memory when the
   * tail ring holds that record, else from the files. Records of a source other than
   * `only`, when given, may be the ring's own objects, for a filtered consumer that looks
   * at their seq and source and skips them: copying what it never hands out would cost a
   * copy per record per webhook consumer.
   */
  #readFrom(fromSeq: number, max: number, only: string | null): Promise<LogRecord[]> {
    const s = this.#s!
    // Never from before the first record held: the ring may still hold records retention
    // removed, and a consumer learns of a loss from the seq of the first record it reads.
    const held = s.ring.read(Math.max(fromSeq, s.writer.segments[0]!.firstSeq), max)
    if (held === undefined) return s.reader.read({ fromSeq }, max)
    return Promise.resolve(copiesOf(held, only))
  }

  protected override async onInfo(): Promise<LogInfo> {
    const segments = this.#s!.writer.segments
    const first = segments[0]!
    const lastSeq = lastSeqOf(segments)
    const firstSeq = lastSeq >= first.firstSeq ? first.firstSeq : 0
    let bytes = 0
    for (const seg of segments) bytes += seg.size
    return { firstSeq, lastSeq, records: firstSeq === 0 ? 0 : lastSeq - firstSeq + 1, bytes }
  }

  protected override async onConsumer(name: string, sourceId: string | null, startSeq: number): Promise<LogConsumer> {
    const s = this.#s!
    if (s.open.has(name)) throw new LogError('invalid_argument', `consumer ${name} is already open in this process; close it first`)
    // Claimed before the first await: two opens of one name cannot both pass the check.
    s.open.set(name, null)
    try {
      let stored = s.consumers.get(name)
      if (stored === undefined) {
        // A consumer created now starts at `startSeq`, or at the first record held if that
        // is later: what retention removed before it existed is no loss of its.
        const segments = s.writer.segments
        const lastSeq = lastSeqOf(segments)
        const firstHeld = lastSeq >= segments[0]!.firstSeq ? segments[0]!.firstSeq : lastSeq + 1
        // A start past the end is the next record appended: no position may point past the log's end.
        await s.consumers.create(name, { ack: Math.min(Math.max(startSeq, firstHeld), lastSeq + 1) - 1, sourceId })
        stored = s.consumers.get(name)!
      }
      if (stored.sourceId !== sourceId) {
        throw new LogError('invalid_argument', `consumer ${name} exists with source filter ${JSON.stringify(stored.sourceId)}, not ${JSON.stringify(sourceId)}: a filter is part of a consumer's identity (delete it, or use another name)`)
      }
      let ack = stored.ack
      const lastSeq = lastSeqOf(s.writer.segments)
      if (ack > lastSeq) {
        // The log holds less than this consumer acknowledged (restored from an older copy):
        // starting past the end would skip the records that will take those seqs.
        this.#opts.onWarning(`signal log: consumer ${name} acknowledged seq ${ack} but the log ends at ${lastSeq}; it resumes after ${lastSeq}`, undefined)
        ack = lastSeq
      }
      const consumer = new JournalConsumer(this.#host, name, sourceId, ack)
      s.open.set(name, consumer)
      return consumer
    } catch (err) {
      if (s.open.get(name) === null) s.open.delete(name)
      throw err
    }
  }

  /** What the journal's consumers use of it. */
  readonly #host = {
    read: (fromSeq: number, max: number, only: string | null) => this.#readFrom(fromSeq, max, only),
    waitForAppend: (afterSeq: number, ms: number, signals: readonly AbortSignal[]) => {
      const s = this.#s!
      return s.waiters.wait(lastSeqOf(s.writer.segments), afterSeq, ms, signals)
    },
    savePosition: (name: string, seq: number) => this.#s!.consumers.set(name, seq),
    run: <T>(op: () => Promise<T>) => this.run(op),
    released: (consumer: JournalConsumer) => {
      const open = this.#s?.open
      if (open?.get(consumer.name) === consumer) open.delete(consumer.name)
    },
  }

  protected override async onConsumerInfo(name: string): Promise<ConsumerInfo | null> {
    const stored = this.#s!.consumers.get(name)
    return stored === undefined ? null : { name, sourceId: stored.sourceId, ackSeq: stored.ack }
  }

  protected override async onConsumers(): Promise<ConsumerInfo[]> {
    return [...this.#s!.consumers.all()].map(([name, c]) => ({ name, sourceId: c.sourceId, ackSeq: c.ack }))
  }

  protected override async onDeleteConsumer(name: string): Promise<boolean> {
    const s = this.#s!
    if (s.open.has(name)) throw new LogError('invalid_argument', `consumer ${name} is open; close it before deleting it`)
    if (s.consumers.get(name) === undefined) return false
    await s.consumers.delete(name)
    return true
  }

  protected override onSync(): Promise<void> {
    // Under 'always' every acknowledged append was synced before it was acknowledged.
    return this.#opts.fsync === 'always' ? Promise.resolve() : this.#s!.writer.sync()
  }

  protected override onClosing(): void {
    const s = this.#s!
    // Their waiting fetches resolve empty; later calls on them reject with log_closed.
    for (const consumer of [...s.open.values()]) void consumer?.close()
    s.waiters.wakeAll()
  }

  protected override async onClose(): Promise<void> {
    const s = this.#s!
    try {
      for (const t of s.timers) clearInterval(t)
      await s.commits.drain()
      await s.consumers.drain().catch(() => undefined)
      await s.writer.close()
    } finally {
      s.dedup.clear()
      openDirs.delete(this.#dirKey)
    }
  }
}

/** Seq of the last record published to readers (durable per policy). */
function lastSeqOf(segments: readonly Segment[]): number {
  return segments[segments.length - 1]!.lastSeq
}

function report(removed: readonly Segment[]): RetentionReport {
  if (removed.length === 0) return { segments: 0, fromSeq: 0, toSeq: 0, bytes: 0 }
  let bytes = 0
  for (const seg of removed) bytes += seg.size
  return { segments: removed.length, fromSeq: removed[0]!.firstSeq, toSeq: removed[removed.length - 1]!.lastSeq, bytes }
}
