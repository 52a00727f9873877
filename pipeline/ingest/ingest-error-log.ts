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
  readonly nonce?: string
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
 * Refused ingest requests per source, newest first. Held in memory as a ring per
 * source (`perSource` entries, so a flood of bad requests cannot grow it) and appended
 * to a diagnostics log on disk so the history survives a restart. The disk write is
 * not awaited by the refusal: diagnostics must never slow the answer down.
 */
export class IngestErrorLog {
  readonly #log: SignalLog
  readonly #perSource: number
  readonly #bySource = new Map<string, Entry[]>()
  readonly #onWriteError: (err: unknown) => void
  #seq = 0

  constructor(log: SignalLog, options: { perSource: number; onWriteError: (err: unknown) => void }) {
    this.#log = log
    this.#perSource = options.perSource
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
        const { source_id, nonce, ...record } = stored
        this.#push(source_id, record)
        if (nonce !== undefined && record.key_id !== null && r.time >= nonceSinceMs) {
          nonces.push({ sourceId: source_id, keyId: record.key_id, nonce, time: r.time })
        }
      }
      next = (batch[batch.length - 1] as { seq: number }).seq + 1
    }
    return nonces
  }

  record(sourceId: string, record: IngestErrorRecord, claimedNonce?: string): void {
    this.#push(sourceId, record)
    const stored: StoredRecord = claimedNonce === undefined ? { ...record, source_id: sourceId } : { ...record, source_id: sourceId, nonce: claimedNonce }
    // The request id is unique, so the log's dedup never drops a refusal.
    this.#log.append(record.request_id, Buffer.from(JSON.stringify(stored))).catch(this.#onWriteError)
  }

  #push(sourceId: string, record: IngestErrorRecord): void {
    let ring = this.#bySource.get(sourceId)
    if (ring === undefined) {
      ring = []
      this.#bySource.set(sourceId, ring)
    }
    ring.push({ seq: ++this.#seq, record })
    if (ring.length > this.#perSource) ring.splice(0, ring.length - this.#perSource)
  }

  /** Newest first; `cursor` is the opaque `next_cursor` of the previous page. */
  page(sourceId: string, limit: number, cursor: string | undefined): IngestErrorPage | undefined {
    let before = Number.POSITIVE_INFINITY
    if (cursor !== undefined) {
      const decoded = Number(Buffer.from(cursor, 'base64url').toString('utf8'))
      if (!Number.isSafeInteger(decoded) || decoded <= 0) return undefined
      before = decoded
    }
    const ring = this.#bySource.get(sourceId) ?? []
    const items: IngestErrorRecord[] = []
    let i = ring.length - 1
    while (i >= 0 && (ring[i] as Entry).seq >= before) i--
    for (; i >= 0 && items.length < limit; i--) items.push((ring[i] as Entry).record)
    const last = ring[i + 1]
    const more = i >= 0 && last !== undefined
    return { items, nextCursor: more ? Buffer.from(String(last.seq)).toString('base64url') : null }
  }
}
