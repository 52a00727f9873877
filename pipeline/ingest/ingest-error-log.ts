import type { ErrorCode } from '../../schemas/api-error.js'
import type { SignalLog } from '../log.js'

/** One refused ingest request, as the source's operator sees it (spec 2.7). */
export interface IngestErrorRecord {
  readonly request_id: string
  readonly time: string
  readonly status: number
  readonly code: ErrorCode
  readonly key_id: string | null
  readonly signal_id: string | null
}

/** Stored alongside, never shown: lets a restart re-claim nonces of refused requests. */
interface StoredRecord extends IngestErrorRecord {
  readonly source_id: string
  /** Present when the signature verified: the refusal came from the creator. */
  readonly nonce?: string
  /**
   * The record's place among its source's refusals, the number a cursor names. Kept so
   * that a cursor means the same record after a restart, also once the diagnostics log
   * has dropped its oldest segments (a count rebuilt from what is left would shift).
   */
  readonly n: number
}

/** One ring for refusals of requests whose signature verified, one for the rest. */
interface SourceRings {
  readonly verified: Entry[]
  readonly unverified: Entry[]
  /** Per source, so a cursor tells a creator nothing about other sources' refusals. */
  seq: number
}

interface Entry {
  readonly seq: number
  readonly record: IngestErrorRecord
}

export interface IngestErrorPage {
  readonly items: IngestErrorRecord[]
  readonly nextCursor: string | null
}

/**
 * Refused ingest requests per source, newest first. Held in memory in two rings per
 * source of `perSource` entries each: refusals of requests whose signature verified
 * (they came from the creator) and the rest. Anyone can send unsigned junk naming a
 * source; it fills only the second ring and never pushes the creator's own refusals
 * out. Since anyone can name any source, the second rings also share one bound over
 * all sources (`maxUnverified`): past it the longest rings are cut first, so junk
 * aimed at many sources costs a bounded amount of memory and a source that receives
 * little keeps what it has. Appended to a diagnostics log on disk so the history
 * survives a restart; the disk write is not awaited: diagnostics must never slow the
 * answer down.
 */
export class IngestErrorLog {
  readonly #log: SignalLog
  readonly #perSource: number
  readonly #maxUnverified: number
  /** Entries in all the unverified rings together. */
  #unverified = 0
  readonly #bySource = new Map<string, SourceRings>()
  readonly #onWriteError: (err: unknown) => void
  #queue: Array<{ sourceId: string; record: IngestErrorRecord; claimedNonce: string | undefined }> = []

  constructor(log: SignalLog, options: { perSource: number; maxUnverified: number; onWriteError: (err: unknown) => void }) {
    this.#log = log
    this.#perSource = options.perSource
    this.#maxUnverified = options.maxUnverified
    this.#onWriteError = options.onWriteError
  }

  /**
   * Reloads the history from the diagnostics log and hands back the nonces claimed by
   * refused requests within `nonceSinceMs`, so the caller can restore them.
   */
  async load(nonceSinceMs: number): Promise<Array<{ sourceId: string; keyId: string; nonce: string; time: number }>> {
    const nonces: Array<{ sourceId: string; keyId: string; nonce: string; time: number }> = []
    const info = this.#log.info()
    let next = info.firstSeq === 0 ? 1 : info.firstSeq
    for (;;) {
      const batch = await this.#log.read({ fromSeq: next }, 4096)
      if (batch.length === 0) break
      for (const r of batch) {
        const stored = JSON.parse(Buffer.from(r.data).toString('utf8')) as StoredRecord
        const { source_id, nonce, n, ...record } = stored
        this.#push(source_id, record, nonce !== undefined, n)
        if (nonce !== undefined && record.key_id !== null && r.time >= nonceSinceMs) {
          nonces.push({ sourceId: source_id, keyId: record.key_id, nonce, time: r.time })
        }
      }
      next = (batch[batch.length - 1] as { seq: number }).seq + 1
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
    this.#queue = []
    for (const { sourceId, record, claimedNonce } of queue) this.#keep(sourceId, record, claimedNonce)
  }

  #keep(sourceId: string, record: IngestErrorRecord, claimedNonce: string | undefined): void {
    const n = this.#push(sourceId, record, claimedNonce !== undefined)
    const stored: StoredRecord =
      claimedNonce === undefined ? { ...record, source_id: sourceId, n } : { ...record, source_id: sourceId, nonce: claimedNonce, n }
    // An empty dedup id turns the log's dedup off: every refusal is its own record,
    // and the log keeps no per-record memory for it.
    this.#log.append('', Buffer.from(JSON.stringify(stored))).catch(this.#onWriteError)
  }

  /** Keeps a record under the next number of its source (or `storedSeq`, on load) and returns that number. */
  #push(sourceId: string, record: IngestErrorRecord, verified: boolean, storedSeq?: number): number {
    let rings = this.#bySource.get(sourceId)
    if (rings === undefined) {
      rings = { verified: [], unverified: [], seq: 0 }
      this.#bySource.set(sourceId, rings)
    }
    // Records are appended in the order they were numbered, so a stored number is above
    // the last one; a record without one (or out of order) takes the next number.
    rings.seq = storedSeq !== undefined && storedSeq > rings.seq ? storedSeq : rings.seq + 1
    const ring = verified ? rings.verified : rings.unverified
    ring.push({ seq: rings.seq, record })
    // Trim in steps, not per record: splice is O(n).
    if (ring.length > this.#perSource * 1.25) this.#trim(ring, this.#perSource, verified)
    if (!verified && ++this.#unverified > this.#maxUnverified * 1.25) this.#trimUnverified()
    return rings.seq
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
