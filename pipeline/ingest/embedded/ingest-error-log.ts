import type { IngestErrorPage, IngestErrorRecord } from '../ports.js'
import { readLegacySegments, removeLegacySegments } from './ingest-error-log-migration.js'
import { RefusalFile } from './refusal-file.js'

/** Stored alongside, never shown: lets a restart re-claim nonces of refused requests. */
export interface StoredRecord extends IngestErrorRecord {
  readonly source_id: string
  /** Present when the signature verified: the refusal came from the creator. */
  readonly nonce?: string
  /** The record's number among its source's refusals, the number a cursor names (see `#push`). */
  readonly n: number
}

/** One ring for refusals of requests whose signature verified, one for the rest. */
interface SourceRings {
  readonly verified: Entry[]
  readonly unverified: Entry[]
  /** The last number given. Per source, so a cursor tells a creator nothing about other sources' refusals. */
  seq: number
}

interface Entry {
  readonly seq: number
  readonly record: IngestErrorRecord
  /** The nonce a verified request claimed: written again when the file is rewritten. */
  readonly nonce: string | undefined
}

export interface IngestErrorLogOptions {
  readonly perSource: number
  readonly maxUnverified: number
  readonly onWriteError: (err: unknown) => void
  readonly onWarning: (message: string, err: unknown) => void
}

/**
 * Numbers per millisecond of a record's time: a record is numbered at least its time
 * times this, so numbers keep rising across a restart that lost the newest records (a
 * cursor then names no newer record than it did), and stay safe integers to the year 2248.
 */
const NUMBERS_PER_MS = 1024

/**
 * Refused ingest requests per source, newest first. Held in memory in two rings per
 * source of `perSource` entries each: refusals of requests whose signature verified
 * (they came from the creator) and the rest. Anyone can send unsigned junk naming a
 * source; it fills only the second ring and never pushes the creator's own refusals
 * out. Since anyone can name any source, the second rings also share one bound over
 * all sources (`maxUnverified`): past it the longest rings are cut first, so junk
 * aimed at many sources costs a bounded amount of memory and a source that receives
 * little keeps what it has. Kept on disk as what memory holds (RefusalFile, rewritten
 * as the rings once enough was appended), so the same holds after a restart; the disk
 * write is not awaited: diagnostics must never slow the answer down.
 */
export class IngestErrorLog {
  readonly #file: RefusalFile
  readonly #dir: string
  readonly #perSource: number
  readonly #maxUnverified: number
  /** Entries in all the unverified rings together. */
  #unverified = 0
  readonly #bySource = new Map<string, SourceRings>()
  readonly #onWriteError: (err: unknown) => void
  readonly #onWarning: (message: string, err: unknown) => void
  #queue: Array<{ sourceId: string; record: IngestErrorRecord; claimedNonce: string | undefined }> = []
  #rewriting: Promise<void> = Promise.resolve()

  private constructor(file: RefusalFile, dir: string, options: IngestErrorLogOptions) {
    this.#file = file
    this.#dir = dir
    this.#perSource = options.perSource
    this.#maxUnverified = options.maxUnverified
    this.#onWriteError = options.onWriteError
    this.#onWarning = options.onWarning
  }

  /** Opens the history kept in `dir`; `load` reads it. */
  static async open(dir: string, options: IngestErrorLogOptions): Promise<IngestErrorLog> {
    return new IngestErrorLog(await RefusalFile.open(dir, options.onWriteError), dir, options)
  }

  /**
   * Reloads the history and hands back the nonces claimed by refused requests within
   * `nonceSinceMs`, so the caller can restore them.
   */
  async load(nonceSinceMs: number): Promise<Array<{ sourceId: string; keyId: string; nonce: string; time: number }>> {
    const nonces: Array<{ sourceId: string; keyId: string; nonce: string; time: number }> = []
    const take = (stored: StoredRecord) => {
      // Records of earlier versions have no client_address: null, as the list shows it.
      const { source_id, nonce, n, client_address = null, ...kept } = stored
      const record = { ...kept, client_address }
      if (!this.#push(source_id, record, nonce, n)) return
      const time = Date.parse(record.time)
      if (nonce !== undefined && record.key_id !== null && time >= nonceSinceMs) nonces.push({ sourceId: source_id, keyId: record.key_id, nonce, time })
    }
    let legacySegments: string[] = []
    try {
      const legacy = await readLegacySegments(this.#dir)
      for (const stored of legacy.records) take(stored)
      legacySegments = legacy.segments
    } catch (err) {
      // Diagnostics: a damaged old history must not stop the start. Left in place (so read,
      // and warned about, again at the next start) rather than deleted.
      this.#onWarning('the ingest-error history of an earlier version could not be read: its refusals are not listed, and its files are left in place', err)
    }
    for await (const line of this.#file.lines()) {
      let stored: StoredRecord
      try {
        stored = JSON.parse(line) as StoredRecord
      } catch {
        // A line a crash tore, or one damaged on disk: diagnostics, so the rest still counts.
        continue
      }
      if (isStoredRecord(stored)) take(stored)
    }
    if (legacySegments.length > 0 || this.#file.hasOlder) {
      // What was read from old segments (ingest-error-log-migration.ts) or older generations
      // goes into a new file; only once it is there are they removed.
      try {
        await this.#file.rewrite(this.#keptLines())
        await this.#file.dropOlder()
        await removeLegacySegments(this.#dir, legacySegments)
      } catch (err) {
        // Kept for the next start to read again; diagnostics must not stop this one.
        this.#onWriteError(err)
      }
    }
    return nonces
  }

  /**
   * `claimedNonce` is given when the signature verified and the nonce was claimed.
   * Kept after the current event-loop turn, once the answer has gone out: the work of
   * keeping it (for an existing source only) would otherwise lengthen the answer and
   * tell a prober, by timing, that the source exists.
   */
  record(sourceId: string, record: IngestErrorRecord, claimedNonce?: string): void {
    this.#queue.push({ sourceId, record, claimedNonce })
    if (this.#queue.length === 1) setImmediate(this.#flush)
  }

  readonly #flush = (): void => {
    const queue = this.#queue
    if (queue.length === 0) return
    this.#queue = []
    const lines: string[] = []
    for (const { sourceId, record, claimedNonce } of queue) {
      const n = this.#push(sourceId, record, claimedNonce) as number
      lines.push(storedLine(sourceId, record, claimedNonce, n))
    }
    this.#file.append(Buffer.from(lines.join('')))
    if (this.#file.rewriteDue) this.#rewrite()
  }

  /** Rewrites the file as what the rings hold now, in the background. */
  #rewrite(): void {
    this.#rewriting = this.#file.rewrite(this.#keptLines()).catch(this.#onWriteError)
  }

  /** What the rings hold now, as lines made when taken. */
  #keptLines(): Iterable<string> {
    // Copied now: the rings change while the lines are written.
    const kept: Array<[string, Entry]> = []
    for (const [sourceId, rings] of this.#bySource) {
      for (const e of rings.verified) kept.push([sourceId, e])
      for (const e of rings.unverified) kept.push([sourceId, e])
    }
    return (function* () {
      for (const [sourceId, e] of kept) yield storedLine(sourceId, e.record, e.nonce, e.seq)
    })()
  }

  /** Writes back what was appended: the next start reads it. */
  async close(): Promise<void> {
    this.#flush()
    await this.#rewriting
    await this.#file.close()
  }

  /**
   * Keeps a record and returns its number: at least the next of its source, and at least
   * its time times NUMBERS_PER_MS. On load (`stored` given) a record keeps its number, and
   * one not above its ring's last is a copy (written twice around a rewrite): skipped,
   * and the result is undefined.
   */
  #push(sourceId: string, record: IngestErrorRecord, nonce: string | undefined, stored?: number): number | undefined {
    let rings = this.#bySource.get(sourceId)
    if (rings === undefined) {
      rings = { verified: [], unverified: [], seq: 0 }
      this.#bySource.set(sourceId, rings)
    }
    const verified = nonce !== undefined
    const ring = verified ? rings.verified : rings.unverified
    let seq: number
    if (stored === undefined) seq = Math.max(rings.seq + 1, Date.parse(record.time) * NUMBERS_PER_MS || 0)
    // A record of the old segments without a number (ingest-error-log-migration.ts) is numbered in the order it comes.
    else if (stored === 0) seq = rings.seq + 1
    else if (ring.length > 0 && (ring[ring.length - 1] as Entry).seq >= stored) return undefined
    else seq = stored
    rings.seq = Math.max(rings.seq, seq)
    ring.push({ seq, record, nonce })
    // Trim in steps, not per record: splice is O(n).
    if (ring.length > this.#perSource * 1.25) this.#trim(ring, this.#perSource, verified)
    if (!verified && ++this.#unverified > this.#maxUnverified * 1.25) this.#trimUnverified()
    return seq
  }

  #trim(ring: Entry[], keep: number, verified: boolean): void {
    const dropped = ring.splice(0, Math.max(0, ring.length - keep)).length
    if (!verified) this.#unverified -= dropped
  }

  /**
   * Brings the unverified rings back to `maxUnverified` in all by cutting every ring to
   * one length, the largest that fits: the sources that received the most junk lose
   * their oldest entries, the others lose nothing. Runs once per quarter of the bound.
   */
  #trimUnverified(): void {
    const lengths = [...this.#bySource.values()].map((r) => r.unverified.length).sort((a, b) => b - a)
    // Walk down from the longest: with the i + 1 longest cut to `cap`, the total is i + 1 caps plus the rest.
    let rest = this.#unverified
    let cap = 0
    for (let i = 0; i < lengths.length; i++) {
      rest -= lengths[i] as number
      const next = lengths[i + 1] ?? 0
      cap = Math.floor((this.#maxUnverified - rest) / (i + 1))
      if (cap >= next) break
    }
    for (const rings of this.#bySource.values()) if (rings.unverified.length > cap) this.#trim(rings.unverified, cap, false)
  }

  /** Newest first; `cursor` is the opaque `next_cursor` of the previous page. */
  page(sourceId: string, limit: number, cursor: string | undefined): IngestErrorPage | undefined {
    let before = Number.POSITIVE_INFINITY
    if (cursor !== undefined) {
      const text = Buffer.from(cursor, 'base64url').toString('utf8')
      const decoded = Number(text)
      if (!/^[1-9][0-9]{0,15}$/.test(text) || !Number.isSafeInteger(decoded)) return undefined
      before = decoded
    }
    const rings = this.#bySource.get(sourceId)
    if (rings === undefined) return { items: [], nextCursor: null }
    // Merge the two rings newest first, both already in seq order. A ring is trimmed in
    // steps and may hold up to a quarter more than its bound: only the newest are shown.
    const aFloor = Math.max(0, rings.verified.length - this.#perSource)
    const bFloor = Math.max(0, rings.unverified.length - this.#perSource)
    let a = lastBefore(rings.verified, before)
    let b = lastBefore(rings.unverified, before)
    const items: IngestErrorRecord[] = []
    let lastSeq = 0
    while (items.length < limit && (a >= aFloor || b >= bFloor)) {
      const fromA = b < bFloor || (a >= aFloor && (rings.verified[a] as Entry).seq > (rings.unverified[b] as Entry).seq)
      const entry = (fromA ? rings.verified[a--] : rings.unverified[b--]) as Entry
      items.push(entry.record)
      lastSeq = entry.seq
    }
    const more = a >= aFloor || b >= bFloor
    return { items, nextCursor: more ? Buffer.from(String(lastSeq)).toString('base64url') : null }
  }
}

/** Index of the newest entry with seq below `before`, or -1. */
function lastBefore(ring: Entry[], before: number): number {
  let i = ring.length - 1
  while (i >= 0 && (ring[i] as Entry).seq >= before) i--
  return i
}

function storedLine(sourceId: string, record: IngestErrorRecord, nonce: string | undefined, n: number): string {
  const stored: StoredRecord = nonce === undefined ? { ...record, source_id: sourceId, n } : { ...record, source_id: sourceId, nonce, n }
  return `${JSON.stringify(stored)}\n`
}

function isStoredRecord(v: unknown): v is StoredRecord {
  const r = v as Partial<StoredRecord> | null
  return typeof r === 'object' && r !== null && typeof r.source_id === 'string' && typeof r.time === 'string' && Number.isSafeInteger(r.n)
}
