import { dirname } from 'node:path'
import { syncDir, temporaryPathOf, unlinkIfPresent } from '../../../storage/index.js'
import type { ReadStart, SignalLog } from '../../log.js'
import { readBatches, readRecord } from '../../log-reads.js'
import { NonceStore } from './nonce-store.js'
import type { RefusedNonce } from './refusal-history.js'
import type { RetryNote } from './retry-notes.js'
import { SignalDedup } from './signal-dedup.js'
import { isMarkerData } from '../../marker-record.js'
import { decodeSignalRecord, dedupRecordOf } from '../signal-record.js'
import { readStateSnapshot, writeStateSnapshot, type LogMark } from './state-snapshot.js'

export interface IngestStateOptions {
  readonly log: SignalLog
  readonly now: () => number
  readonly nonceWindowMs: number
  readonly maxLiveNonces: number
  readonly dedupWindowMs: number
  readonly maxDedupEntries: number
  /** Where the state is saved for the next start; without it every start rebuilds from the log. */
  readonly stateFile?: string | undefined
  readonly onWarning: (message: string, err: unknown) => void
  /**
   * Resolves once every request past its last key check has its answer (the revocation
   * barrier): each of them remembers its signal before its answer.
   */
  readonly settled: () => Promise<void>
  /** The nonces refused requests claimed before the start, which the log never saw (EmbeddedRefusalHistory). */
  readonly refusedNonces?: (() => readonly RefusedNonce[]) | undefined
  /** What deduplicated retries spent before the start, which the log does not hold either (RetryNotes). */
  readonly retryNotes?: { replay(take: (note: RetryNote) => void): Promise<number> } | undefined
}

/** Times one step of the start (the service's start-up steps); by default, just runs it. */
export type TimeStep = <T>(step: string, run: () => Promise<T>) => Promise<T>

/**
 * The embedded adapters' memory of what was accepted: the live nonces and the dedup
 * index, and how they outlive the process. A start takes over the state a running or
 * stopping gateway saved (state-snapshot.ts) if it matches the log, and reads the log
 * from there; a restart after `kill -9` reads the log alone. The adapters
 * (EmbeddedNonceClaims, EmbeddedSignalIndex) ask the stores (`nonces`, `dedup`) on every
 * request; this class only fills and saves them. The pipeline knows none of it.
 */
export class IngestState {
  readonly #o: IngestStateOptions
  #nonces: NonceStore
  #dedup: SignalDedup
  /** The log seq the state file covers (-1: none yet); a save with nothing new after it is skipped. */
  #savedSeq = -1
  /** The save being written: saves take turns on the one file. */
  #saving: Promise<unknown> = Promise.resolve()
  /**
   * Set for good once the log refused an append: its record may be in the log (counted,
   * even written) but never remembered, so no state saved while running could claim to
   * cover the log up to its end.
   */
  #appendRefused = false

  constructor(options: IngestStateOptions) {
    this.#o = options
    this.#nonces = this.#newNonceStore()
    this.#dedup = this.#newDedup()
  }

  #newNonceStore(): NonceStore {
    return new NonceStore({ windowMs: this.#o.nonceWindowMs, maxEntries: this.#o.maxLiveNonces })
  }

  #newDedup(): SignalDedup {
    return new SignalDedup({ windowMs: this.#o.dedupWindowMs, maxEntries: this.#o.maxDedupEntries })
  }

  /** Replaced, not refilled, when a saved state turns out unusable: read them anew each time. */
  get nonces(): NonceStore {
    return this.#nonces
  }

  get dedup(): SignalDedup {
    return this.#dedup
  }

  /**
   * Everything a start needs before the first request, in order: the state from the last
   * save and the log (`rebuild`), then the nonces of refused requests and what retries
   * spent, which the log does not hold.
   */
  async recover(time: TimeStep = (_step, run) => run()): Promise<RecoveryReport> {
    const rebuilt = await time('dedup_and_nonces', () => this.rebuild())
    for (const n of this.#o.refusedNonces?.() ?? []) this.restoreNonce(n.sourceId, n.keyId, n.nonce, n.time)
    const notes = this.#o.retryNotes
    const retries = notes === undefined ? 0 : await time('retry_notes', () => notes.replay((note) => this.restoreRetry(note)))
    return { ...rebuilt, retries, dedupEntries: this.#dedup.size, nonces: this.#nonces.size }
  }

  /** The log refused an append: no state is saved while running until a restart. */
  appendRefused(): void {
    this.#appendRefused = true
  }

  /**
   * Rebuilds the nonce and dedup state after a restart, so a retry of a signal accepted
   * before a crash still gets its deduplicated 202 and a captured request cannot be
   * replayed: from the last saved state plus the records the log took after it, or else
   * from the log alone (the dedup window's records).
   */
  async rebuild(): Promise<RebuildReport> {
    const now = this.#o.now()
    const windowStart = now - this.#o.dedupWindowMs
    const snapshot = await this.#restoreSnapshot(now)
    const mark = snapshot?.log
    // Records up to the mark are in the snapshot; one older than the window would be
    // expired anyway. Record times never go back, so either start is past the mark.
    const start: ReadStart = mark && mark.time >= windowStart ? { fromSeq: mark.seq + 1 } : { fromTime: windowStart }
    let restored = 0
    for await (const batch of readBatches(this.#o.log, start)) {
      for (const entry of batch) {
        // A dispute's placement and a post of outcomes claim no id and no nonce.
        if (isMarkerData(entry.data)) continue
        const r = decodeSignalRecord(entry.data)
        this.#dedup.remember(
          r.source_id,
          r.idempotency_key ?? undefined,
          dedupRecordOf(r),
          entry.time,
          // A signal appended while the state was being saved can be in both.
          snapshot !== undefined,
        )
        this.#nonces.restore(r.source_id, r.key_id, r.nonce, entry.time, now)
        restored++
      }
    }
    this.#savedSeq = mark?.seq ?? -1
    return { restored, snapshot: snapshot === undefined ? undefined : { entries: snapshot.entries, writtenAt: snapshot.writtenAt } }
  }

  /**
   * Takes over the last saved state if it matches the log: the record it names must be
   * the one the log holds at that seq (a log restored from a backup, or cut back by a
   * power cut, would not match). The file stays until the next save replaces it: a later
   * start may take it over again and read more of the log after it, which is slower but
   * right, since the log holds everything after the mark.
   */
  async #restoreSnapshot(now: number): Promise<{ log: LogMark | null; entries: number; writtenAt: number } | undefined> {
    const file = this.#o.stateFile
    if (file === undefined) return undefined
    // An unusable file is removed at once (the folder synced, so a power cut does not
    // bring it back): the next start would only refuse it again.
    const skip = async (why: string, err?: unknown) => {
      this.#o.onWarning(`ingest state snapshot not used (${why}); rebuilding from the log`, err)
      await unlinkIfPresent(file)
        .then(() => syncDir(dirname(file)))
        .catch((err: unknown) => this.#o.onWarning('the unusable ingest state snapshot could not be removed', err))
      this.#dedup = this.#newDedup()
      this.#nonces = this.#newNonceStore()
      return undefined
    }
    try {
      // A save cut short by a crash leaves its temporary file, as large as the state.
      await unlinkIfPresent(temporaryPathOf(file))
      const snapshot = await readStateSnapshot(file)
      if (snapshot === undefined) return undefined
      if (snapshot.dedupWindowMs !== this.#o.dedupWindowMs || snapshot.nonceWindowMs !== this.#o.nonceWindowMs) return skip('written under other windows')
      if (snapshot.log !== null && !(await this.#logHolds(snapshot.log))) return skip(`the log does not hold its last record, seq ${snapshot.log.seq}`)
      await this.#dedup.restoreSnapshot(snapshot.dedup, now)
      await this.#nonces.restoreSnapshot(snapshot.nonces, now)
      return { log: snapshot.log, entries: this.#dedup.size + this.#nonces.size, writtenAt: snapshot.writtenAt }
    } catch (err) {
      return skip('unreadable', err)
    }
  }

  async #logHolds(mark: LogMark): Promise<boolean> {
    if ((await this.#o.log.info()).lastSeq < mark.seq) return false
    const record = await readRecord(this.#o.log, mark.seq)
    return record !== undefined && record.time === mark.time && record.dedupId === mark.dedupId
  }

  /** The log's last record (or the one at `seq`, appended and durable): a state saved now covers it. */
  async logMark(at?: number): Promise<LogMark | null> {
    const seq = at ?? (await this.#o.log.info()).lastSeq
    if (seq === 0) return null
    const record = await readRecord(this.#o.log, seq)
    if (record === undefined) throw new Error(`the log cannot read its record at seq ${seq}`)
    return { seq: record.seq, time: record.time, dedupId: record.dedupId }
  }

  /**
   * Writes the nonce and dedup state for the next start. Returns what was written, or
   * undefined without a state file or, for a save while running, with nothing new.
   *
   * - At a clean shutdown `mark` is given: the log's last record, taken once nothing
   *   appends any more, the log since closed cleanly.
   * - While running (no `mark`), the mark is the log's last record now, and the save first
   *   waits for every request that may be appending up to it, so the state holds every
   *   record up to the mark (a record's dedup entry is made once its append is durable).
   *   Records appended while the state is copied out, shard by shard, may be in it too:
   *   the start that takes it over reads the log from after the mark and remembers a
   *   signal found in both once.
   */
  saveState(mark?: LogMark | null): Promise<SavedState | undefined> {
    const saved = this.#saving.then(() => this.#save(mark))
    this.#saving = saved.catch(() => undefined)
    return saved
  }

  async #save(stopMark: LogMark | null | undefined): Promise<SavedState | undefined> {
    const file = this.#o.stateFile
    if (file === undefined) return undefined
    let mark = stopMark
    if (mark === undefined) {
      // The log counts a record from its append on, before it is durable and remembered:
      // the requests appending up to here are waited for first.
      const { lastSeq } = await this.#o.log.info()
      if (lastSeq === 0 || lastSeq === this.#savedSeq) return undefined
      await this.#o.settled()
      if (this.#appendRefused) throw new Error('the signal log refused an append, so the state may not cover it; no state is saved until a restart')
      mark = await this.logMark(lastSeq)
    }
    const now = this.#o.now()
    const running = stopMark === undefined
    const bytes = await writeStateSnapshot(
      file,
      {
        writtenAt: now,
        dedupWindowMs: this.#o.dedupWindowMs,
        nonceWindowMs: this.#o.nonceWindowMs,
        log: mark,
        dedup: this.#dedup.snapshot(now),
        nonces: this.#nonces.snapshot(now),
      },
      // Signals accepted while the state was copied out are in it, past the mark: under a
      // relaxed fsync stance they are on disk only once the log syncs (the stop's save
      // comes after the log closed, which synced it).
      running ? { beforeReplace: () => this.#o.log.sync() } : {},
    )
    this.#savedSeq = mark?.seq ?? 0
    return { bytes, mark, dedupEntries: this.#dedup.size, nonces: this.#nonces.size }
  }

  /** Re-claims a nonce that a refused request used before a restart. */
  restoreNonce(sourceId: string, keyId: string, nonce: string, claimedAt: number): void {
    this.#nonces.restore(sourceId, keyId, nonce, claimedAt, this.#o.now())
  }

  /** Drops expired nonces and dedup entries; called from a slow timer. */
  sweep(): void {
    const now = this.#o.now()
    this.#nonces.sweep(now)
    this.#dedup.sweep(now)
  }

  /**
   * Takes back what a retry noted before a restart (RetryNotes), after `rebuild`: the nonce
   * is claimed again, and the key bound again while its signal is within the dedup window.
   * Like the rebuild, it ignores the bounds: the retry was answered.
   */
  restoreRetry(note: RetryNote): void {
    const now = this.#o.now()
    if (note.nonce !== undefined) this.#nonces.restore(note.source_id, note.key_id, note.nonce, note.time, now)
    const b = note.bound
    if (b === undefined || b.received_at_ms + this.#o.dedupWindowMs <= now) return
    this.#dedup.bindKey(note.source_id, b.key, { bodySha256: b.body_sha256, signalId: b.signal_id, receivedAtMs: b.received_at_ms, test: b.test }, true)
  }
}

/** What the start-up rebuild did, for the start log. */
export interface RebuildReport {
  /** Records read back from the log. */
  readonly restored: number
  /** Set when the state came from a saved one: the nonces and dedup entries it held, and when it was saved. */
  readonly snapshot: { readonly entries: number; readonly writtenAt: number } | undefined
}

/** What the start-up recovery did, for the start log. */
export interface RecoveryReport extends RebuildReport {
  /** Retry notes taken back. */
  readonly retries: number
  readonly dedupEntries: number
  readonly nonces: number
}

/** What `saveState` wrote. */
export interface SavedState {
  readonly bytes: number
  readonly mark: LogMark | null
  readonly dedupEntries: number
  readonly nonces: number
}
