import { DeliverPolicy, DiscardPolicy, jetstream } from '@nats-io/jetstream'
import type { JetStreamClient } from '@nats-io/jetstream'
import type { NatsConnection } from '@nats-io/transport-node'
import type { IngestErrorPage, IngestErrorRecord, RefusalHistory } from '../ports.js'
import { stateError } from './nats-state-errors.js'
import { checkNames, ensureStream } from './stream-setup.js'
import { subjectToken } from './subject-token.js'

export interface NatsRefusalHistoryOptions {
  readonly nc: NatsConnection
  readonly stream: string
  /** Subjects are `<subjectPrefix>.<source token>.v` (signature verified) and `.u` (the rest). */
  readonly subjectPrefix: string
  /** Refusals kept per source and kind: the stream's max_msgs_per_subject. */
  readonly perSource: number
  /** Sources' refusals kept in all, a bound on the stream's disk and memory: its max_msgs. */
  readonly maxRecords: number
  readonly replicas?: number
  /** A record the server refused or never acknowledged (no request awaits it). */
  readonly onWarning: (message: string, err: unknown) => void
}

interface Stored {
  readonly sourceId: string
  readonly record: IngestErrorRecord
}

/** Numbers per millisecond of a record's time: safe integers to the year 2248. */
const NUMBERS_PER_MS = 1024

/** Pages are read whole from the source's subjects: at most 2 × perSource records. */
const READ_TIMEOUT_MS = 5_000

/**
 * The refused ingest requests of each source, in one JetStream stream every gateway
 * writes and reads. Each source has two subjects, verified and unverified refusals, each
 * keeping the newest `perSource` (max_msgs_per_subject, the oldest discarded), so junk
 * naming a source never pushes its creator's own refusals out. A record is one publish
 * not awaited by the request.
 *
 * Pages: the stream sequence orders records across both subjects and every gateway, so
 * "newest first" is by sequence. A cursor is not that sequence, which every source's
 * refusals advance (a creator paging would learn how often the others are refused): each
 * record of the source is numbered from its own time and its source's records before
 * it, max(previous + 1, time in ms × 1024), as the embedded history numbers them, and a
 * cursor is the number of the last record of the page before (base64url of its decimal):
 * the next page is the records numbered below it. Numbers rise with the sequence, so
 * that is the records after it. A number depends on the source's records before it only
 * within a run of one millisecond (or a clock set back): when the oldest record of such a
 * run is discarded, a cursor into it may show one record twice or skip one. A page reads
 * the source's records (at most 2 × perSource) through a short-lived ordered consumer
 * filtered on `<prefix>.<token>.*`; records of another source that shares the token (a
 * 132-bit hash) are dropped by their source id.
 *
 * Memory: two subjects per source that refused anything (~190 B each on the server), and
 * the records on disk, at most `maxRecords` (`discard: old` past it: the oldest go).
 */
export class NatsRefusalHistory implements RefusalHistory {
  readonly #js: JetStreamClient
  readonly #o: NatsRefusalHistoryOptions

  private constructor(js: JetStreamClient, o: NatsRefusalHistoryOptions) {
    this.#js = js
    this.#o = o
  }

  static async open(o: NatsRefusalHistoryOptions): Promise<NatsRefusalHistory> {
    checkNames(o.stream, o.subjectPrefix)
    await ensureStream(o.nc, {
      name: o.stream,
      subjects: [`${o.subjectPrefix}.*.*`],
      max_msgs_per_subject: o.perSource,
      max_msgs: o.maxRecords,
      discard: DiscardPolicy.Old,
      num_replicas: o.replicas ?? 1,
    })
    return new NatsRefusalHistory(jetstream(o.nc), o)
  }

  record(sourceId: string, record: IngestErrorRecord, claimedNonce?: string): void {
    const subject = `${this.#o.subjectPrefix}.${subjectToken(sourceId)}.${claimedNonce === undefined ? 'u' : 'v'}`
    const stored: Stored = { sourceId, record }
    this.#js.publish(subject, JSON.stringify(stored)).catch((err: unknown) => this.#o.onWarning('a refusal was not recorded', stateError('recording a refusal', err)))
  }

  async page(sourceId: string, limit: number, cursor: string | undefined): Promise<IngestErrorPage | undefined> {
    let below = Number.POSITIVE_INFINITY
    if (cursor !== undefined) {
      const text = Buffer.from(cursor, 'base64url').toString('utf8')
      if (!/^[1-9][0-9]{0,15}$/.test(text) || Buffer.from(text).toString('base64url') !== cursor) return undefined
      below = Number(text)
    }
    const all = numbered(await this.#read(sourceId))
    // A cursor names a record this source listed (it may have aged out since).
    if (cursor !== undefined && !(all.length > 0 && below <= all[0]!.n)) return undefined
    const newer = all.filter((r) => r.n < below)
    const items = newer.slice(0, limit)
    const last = items[items.length - 1]
    return { items: items.map((r) => r.record), nextCursor: newer.length > limit && last !== undefined ? Buffer.from(String(last.n)).toString('base64url') : null }
  }

  /** The source's records, newest first, with their stream sequences. */
  async #read(sourceId: string): Promise<{ seq: number; record: IngestErrorRecord }[]> {
    try {
      const consumer = await this.#js.consumers.get(this.#o.stream, {
        filter_subjects: `${this.#o.subjectPrefix}.${subjectToken(sourceId)}.*`,
        deliver_policy: DeliverPolicy.All,
      })
      try {
        const pending = (await consumer.info(true)).num_pending
        const out: { seq: number; record: IngestErrorRecord }[] = []
        if (pending === 0) return out
        const batch = await consumer.fetch({ max_messages: pending, expires: READ_TIMEOUT_MS })
        for await (const m of batch) {
          const stored = m.json<Stored>()
          if (stored.sourceId === sourceId) out.push({ seq: m.seq, record: stored.record })
          if (m.info.pending === 0) break
        }
        return out.sort((x, y) => y.seq - x.seq)
      } finally {
        await consumer.delete().catch(() => undefined)
      }
    } catch (err) {
      throw stateError('reading refusals', err)
    }
  }
}

/** The source's records (newest first) with the numbers their cursors carry, which rise with the sequence. */
function numbered(newestFirst: readonly { seq: number; record: IngestErrorRecord }[]): { n: number; record: IngestErrorRecord }[] {
  const out: { n: number; record: IngestErrorRecord }[] = new Array(newestFirst.length)
  let previous = 0
  for (let i = newestFirst.length - 1; i >= 0; i--) {
    const { record } = newestFirst[i]!
    previous = Math.max(previous + 1, Date.parse(record.time) * NUMBERS_PER_MS || 0)
    out[i] = { n: previous, record }
  }
  return out
}
