import { toStoreError } from './clickhouse-errors.js'
import { openClickHouse, type ClickHouseConnection, type ClickHouseTarget, type RawFormat } from './clickhouse-connection.js'
import { MIGRATIONS } from './migrations/index.js'
import type { DisputeStatusInput, OutcomeInput, OutcomeResult, Receipt, ReceiptInput, RecordResult, SourceStats } from './receipt.js'
import { decodeCursor, encodeCursor } from './receipt-cursor.js'
import { isReceiptId, receiptIdOf } from './receipt-id.js'
import { readSourceActivity, type ActivityCounts, type ActivityWindow } from './receipt-activity.js'
import { readSourceStats } from './receipt-stats.js'
import { csvExportStatement, EXPORT_COLUMNS, exportStatement, getStatement, keysStatement, pageKeysStatement, pageStatement, type ReceiptKey, recordedStatement, storedReceiptsStatement, type Statement } from './receipt-query.js'
import type { ExportFormat, ExportPosition, ReceiptFilter, ReceiptListQuery, ReceiptPage, ReceiptStore } from './receipt-store.js'
import { ReceiptStoreError } from './receipt-store-error.js'
import { LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, OUTCOMES_PER_POST_MAX, RECORD_BATCH_MAX } from './limits.js'
import { type Migration, type MigrationLock, migrate } from './schema-migrations.js'
import { loadRows, receiptCount, storedRows } from './receipt-transfer.js'
import { RecordedIdIndex } from './recorded-id-index.js'


/**
 * CSV goes out as ClickHouse's CSV after a header line of our own: chDB's streaming cursor
 * formats each block on its own and would repeat CSVWithNames' header in every chunk.
 * ClickHouse quotes every text value, so an empty string is `""`; NULL is an empty field
 * (format_csv_null_representation, in clickhouse-connection.ts); text columns are
 * formula-safe (csvExportStatement).
 */
const FORMATS: Record<ExportFormat, RawFormat> = { ndjson: 'JSONEachRow', csv: 'CSV', parquet: 'Parquet' }
const CSV_HEADER = new TextEncoder().encode(`${EXPORT_COLUMNS.map((c) => `"${c}"`).join(',')}\n`)
const DISPUTE_RANK = { open: 1, disputed: 2, rejected: 2 } as const
/** The columns `record()` writes, in the order of each row's values. */
const RECEIPT_COLUMNS = ['source_id', 'test', 'emitted_at', 'receipt_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'confidence', 'note', 'received_at', 'recorded_at'] as const

export interface ClickHouseReceiptStoreOptions {
  readonly target: ClickHouseTarget
  /** For tests of the migration runner; the released list by default. */
  readonly migrations?: readonly Migration[]
  /**
   * Held while migrating, where other processes may open the same server's store at the
   * same time (schema-migrations.ts); none by default.
   */
  readonly migrationLock?: MigrationLock
  /** The clock recorded_at and posted_at come from. */
  readonly now?: () => number
}

type Row = Omit<Receipt, 'test'> & { test: boolean | number }

/** An ISO 8601 UTC instant as milliseconds, or undefined when it is not one. */
function instantMs(value: unknown): number | undefined {
  if (typeof value !== 'string' || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/.test(value)) return undefined
  const ms = Date.parse(value)
  return Number.isFinite(ms) && ms >= 0 ? ms : undefined
}

function invalid(message: string): ReceiptStoreError {
  return new ReceiptStoreError('invalid_argument', message)
}

/** The receipt store on ClickHouse: chDB in this process, or a server at CLICKHOUSE_URL. */
export class ClickHouseReceiptStore implements ReceiptStore {
  readonly #o: ClickHouseReceiptStoreOptions
  readonly #now: () => number
  #conn: ClickHouseConnection | undefined
  #opening: Promise<void> | undefined
  #closed = false
  readonly #recordedIds = new RecordedIdIndex({
    count: async () => Number((await this.#rows<{ n: number | string }>('counting recorded receipts', { query: 'SELECT count() AS n FROM receipt_ids', params: {} }))[0]?.n ?? 0),
    keys: () => this.#recordedKeys(),
  })

  constructor(options: ClickHouseReceiptStoreOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  /**
   * Builds (again) the in-memory filter of recorded ids that spares `record` the look-up of
   * ids it certainly does not hold; resolves once it is in use. Until then, and if it
   * fails, every id is looked up. The filter knows what the store listed when it was built
   * and what `record` wrote or found since, not what other processes write later: the
   * recorder builds it when it takes its consumer and asks `verify` for every record a
   * previous holder may have written.
   */
  async trackRecordedIds(): Promise<void> {
    await this.open()
    await this.#recordedIds.build()
  }

  async *#recordedKeys(): AsyncIterable<string> {
    const decoder = new TextDecoder()
    let rest = ''
    try {
      for await (const chunk of this.#c.stream('SELECT substring(receipt_id, 4, 16) FROM receipt_ids', {}, 'CSV')) {
        const lines = (rest + decoder.decode(chunk, { stream: true })).split('\n')
        rest = lines.pop()!
        // CSV quotes every text value: "0123456789abcdef".
        for (const line of lines) if (line.length === 18) yield line.slice(1, 17)
      }
    } catch (err) {
      throw toStoreError('reading recorded receipt ids', err)
    }
  }

  open(): Promise<void> {
    this.#opening ??= this.#open().catch(async (err) => {
      this.#opening = undefined
      const conn = this.#conn
      this.#conn = undefined
      await conn?.close().catch(() => {})
      throw err
    })
    return this.#opening
  }

  async #open(): Promise<void> {
    if (this.#closed) throw new ReceiptStoreError('store_closed', 'receipt store: closed')
    this.#conn = await openClickHouse(this.#o.target)
    await migrate(this.#conn.client, this.#o.migrations ?? MIGRATIONS, this.#o.migrationLock)
  }

  get #c(): ClickHouseConnection {
    if (this.#closed) throw new ReceiptStoreError('store_closed', 'receipt store: closed')
    if (this.#conn === undefined) throw new ReceiptStoreError('store_closed', 'receipt store: not open')
    return this.#conn
  }

  async #rows<T>(what: string, s: Statement): Promise<T[]> {
    const conn = this.#c
    try {
      return await (await conn.client.query({ query: s.query, query_params: s.params, format: 'JSONEachRow' })).json<T>()
    } catch (err) {
      throw toStoreError(what, err)
    }
  }

  async #insert(what: string, values: readonly Record<string, unknown>[], table = 'receipts'): Promise<void> {
    if (values.length === 0) return
    const conn = this.#c
    try {
      await conn.client.insert({ table, values: values as Record<string, unknown>[], format: 'JSONEachRow' })
    } catch (err) {
      throw toStoreError(what, err)
    }
  }

  async record(batch: readonly ReceiptInput[], options: { readonly verify?: boolean } = {}): Promise<RecordResult> {
    if (batch.length > RECORD_BATCH_MAX) throw invalid(`at most ${RECORD_BATCH_MAX} receipts per batch (got ${batch.length})`)
    const fresh = new Map<string, { input: ReceiptInput; emittedMs: number; receivedMs: number }>()
    for (const input of batch) {
      const emittedMs = instantMs(input.emitted_at)
      const receivedMs = instantMs(input.received_at)
      if (emittedMs === undefined || receivedMs === undefined) throw invalid(`receipt ${input.source_id}/${input.signal_id}: emitted_at and received_at must be ISO 8601 UTC`)
      const id = receiptIdOf(input.source_id, input.signal_id)
      // The first of a signal_id in a batch is the one the log accepted first.
      if (!fresh.has(id)) fresh.set(id, { input, emittedMs, receivedMs })
    }
    if (fresh.size === 0) return { recorded: 0, alreadyRecorded: batch.length }
    // A receipt already recorded is never written again: after a redelivery the rows would
    // only fold into themselves, but a signal_id the log accepted again later carries other
    // fields (and perhaps another emitted_at, which would make a second row). Outside a
    // verified batch only the ids the filter may hold are looked up: most of the look-up's
    // cost is the engine parsing the ids bound in its statement, and a new receipt's id is
    // almost never among them.
    const batchIds = [...fresh.keys()]
    const filter = options.verify === true ? undefined : this.#recordedIds.filter()
    const ask = filter === undefined ? batchIds : batchIds.filter((id) => filter.mayHold(id))
    const stored = ask.length === 0 ? [] : await this.#rows<{ receipt_id: string }>('looking up recorded receipts', recordedStatement(ask))
    for (const { receipt_id } of stored) fresh.delete(receipt_id)
    if (options.verify === true && fresh.size > 0) await this.#relist(fresh)
    const recordedAt = this.#now()
    // One JSON array per receipt, in RECEIPT_COLUMNS' order, written straight into the
    // insert's body: no object per row, no second serialisation by the client.
    let body = ''
    for (const [receiptId, { input, emittedMs, receivedMs }] of fresh) {
      body += `${JSON.stringify([input.source_id, input.test, emittedMs, receiptId, input.agent_id, input.signal_id, input.key_id, input.token, input.severity, input.confidence, input.note, receivedMs, recordedAt])}\n`
    }
    if (fresh.size > 0) {
      const conn = this.#c
      try {
        await conn.insertCompact('receipts', RECEIPT_COLUMNS, Buffer.from(body))
      } catch (err) {
        throw toStoreError('recording receipts', err)
      }
    }
    this.#recordedIds.add(batchIds)
    return { recorded: fresh.size, alreadyRecorded: batch.length - fresh.size }
  }

  /**
   * A crash between an insert's receipt rows and the look-up rows its view writes leaves
   * receipts the look-up does not list: found in the receipts themselves, they are listed
   * again (so a signal_id reused later is still known) and dropped from `fresh`.
   */
  async #relist(fresh: Map<string, { input: ReceiptInput; emittedMs: number }>): Promise<void> {
    const emitted = [...fresh.values()].map((f) => f.emittedMs)
    const sources = [...new Set([...fresh.values()].map((f) => f.input.source_id))]
    const found = await this.#rows<{ receipt_id: string; source_id: string; test: boolean | number; emitted_ms: number }>(
      'looking up recorded receipts',
      storedReceiptsStatement(sources, [...fresh.keys()], Math.min(...emitted), Math.max(...emitted)),
    )
    if (found.length === 0) return
    for (const f of found) fresh.delete(f.receipt_id)
    const rows = found.map((f) => ({ receipt_id: f.receipt_id, source_id: f.source_id, test: Boolean(f.test), emitted_at: Number(f.emitted_ms) }))
    await this.#insert('listing recorded receipts again', rows, 'receipt_ids')
  }

  async get(receiptId: string): Promise<Receipt | undefined> {
    if (!isReceiptId(receiptId)) return undefined
    const [row] = await this.#rows<Row>('reading a receipt', getStatement(receiptId))
    return row === undefined ? undefined : toReceipt(row)
  }

  async list(query: ReceiptListQuery): Promise<ReceiptPage> {
    const limit = query.limit ?? LIST_LIMIT_DEFAULT
    if (!Number.isSafeInteger(limit) || limit < 1 || limit > LIST_LIMIT_MAX) throw invalid(`limit must be a whole number from 1 to ${LIST_LIMIT_MAX}`)
    checkFilter(query)
    const includeTest = query.includeTest === true
    const filter = filterOf(query)
    const after = query.cursor === undefined ? undefined : decodeCursor(query.cursor, filter, includeTest)
    const keys = await this.#rows<ReceiptKey>('listing receipts', pageKeysStatement(filter, includeTest, after, limit))
    const pageKeys = keys.slice(0, limit)
    const last = pageKeys[pageKeys.length - 1]
    if (last === undefined) return { receipts: [] }
    const receipts = (await this.#rows<Row>('listing receipts', pageStatement(filter, includeTest, pageKeys))).map(toReceipt)
    // The cursor is the last key of the page, even if its receipt left the filter in between.
    if (keys.length <= limit) return { receipts }
    return { receipts, next_cursor: encodeCursor({ emittedAtMs: Number(last.emitted_ms), receiptId: last.receipt_id }, filter, includeTest) }
  }

  export(filter: ReceiptFilter, format: ExportFormat, signal?: AbortSignal, after?: ExportPosition): AsyncIterable<Uint8Array> {
    const conn = this.#c
    checkFilter(filter)
    if (after !== undefined && (!Number.isSafeInteger(after.emitted_at_ms) || after.emitted_at_ms < 0)) throw invalid('after.emitted_at_ms must be an instant in milliseconds since the epoch')
    const rawFormat = FORMATS[format]
    if (rawFormat === undefined) throw invalid(`format must be one of ${Object.keys(FORMATS).join(', ')}`)
    const s = format === 'csv' ? csvExportStatement(filterOf(filter), after) : exportStatement(filterOf(filter), after)
    return (async function* () {
      try {
        // A continuation is appended to the file already received, whose header line is there.
        if (format === 'csv' && after === undefined) yield CSV_HEADER
        yield* conn.stream(s.query, s.params, rawFormat, signal)
      } catch (err) {
        if (signal?.aborted) throw signal.reason
        throw toStoreError('exporting receipts', err)
      }
    })()
  }

  async recordOutcomes(items: readonly OutcomeInput[]): Promise<OutcomeResult> {
    if (items.length > OUTCOMES_PER_POST_MAX) throw invalid(`at most ${OUTCOMES_PER_POST_MAX} outcomes per post (got ${items.length})`)
    const refused: { index: number; receipt_id: string; reason: 'unknown_receipt' | 'invalid_item'; message: string }[] = []
    const valid: { index: number; item: OutcomeInput; start: number; end: number; scored: number }[] = []
    items.forEach((item, index) => {
      const start = instantMs(item.window_start)
      const end = instantMs(item.window_end)
      const scored = instantMs(item.scored_at)
      const problem =
        typeof item.receipt_id !== 'string' || !isReceiptId(item.receipt_id) ? 'receipt_id is not a receipt id'
        : start === undefined || end === undefined || scored === undefined ? 'window_start, window_end and scored_at must be ISO 8601 UTC'
        : end < start ? 'window_end is before window_start'
        : typeof item.baseline !== 'number' || !Number.isFinite(item.baseline) ? 'baseline must be a finite number'
        : !(['hit', 'miss', 'void'] as readonly string[]).includes(item.outcome) ? 'outcome must be hit, miss or void'
        : undefined
      if (problem !== undefined) refused.push({ index, receipt_id: String(item.receipt_id), reason: 'invalid_item', message: problem })
      else valid.push({ index, item, start: start!, end: end!, scored: scored! })
    })
    const ids = [...new Set(valid.map((v) => v.item.receipt_id))]
    const keys = new Map<string, { source_id: string; test: boolean | number; emitted_ms: number }>()
    if (ids.length > 0) {
      for (const k of await this.#rows<{ receipt_id: string; source_id: string; test: boolean | number; emitted_ms: number }>('looking up scored receipts', keysStatement(ids))) keys.set(k.receipt_id, k)
    }
    const postedAt = this.#now()
    const rows: Record<string, unknown>[] = []
    for (const v of valid) {
      const key = keys.get(v.item.receipt_id)
      // A test receipt is never scored: to the scorer it does not exist.
      if (key === undefined || key.test === true || key.test === 1) {
        refused.push({ index: v.index, receipt_id: v.item.receipt_id, reason: 'unknown_receipt', message: 'no such receipt' })
        continue
      }
      rows.push({ source_id: key.source_id, test: false, emitted_at: Number(key.emitted_ms), receipt_id: v.item.receipt_id, scoring: { scored_at: v.scored, posted_at: postedAt, window_start: v.start, window_end: v.end, baseline: v.item.baseline, outcome: v.item.outcome } })
    }
    await this.#insert('recording outcomes', rows)
    refused.sort((a, b) => a.index - b.index)
    return { accepted: rows.length, refused }
  }

  async recordDisputeStatuses(items: readonly DisputeStatusInput[]): Promise<void> {
    const rows = items.map((item) => {
      const changed = instantMs(item.changed_at)
      const emitted = instantMs(item.emitted_at)
      if (changed === undefined || emitted === undefined) throw invalid('changed_at and emitted_at must be ISO 8601 UTC')
      const rank = DISPUTE_RANK[item.dispute_status]
      if (rank === undefined) throw invalid('dispute_status must be open, disputed or rejected')
      return { source_id: item.source_id, test: false, emitted_at: emitted, receipt_id: receiptIdOf(item.source_id, item.signal_id), dispute: { rank, changed_at: changed, status: item.dispute_status } }
    })
    await this.#insert('recording dispute statuses', rows)
  }

  async sourceStats(sourceId: string, hours: { readonly fromMs: number; readonly toMs: number }): Promise<SourceStats> {
    return readSourceStats(this.#c.client, sourceId, hours)
  }

  /** Every stored row, as NDJSON, for moving the receipts to another store (receipt-transfer.ts). */
  storedRows(): AsyncIterable<Uint8Array> {
    return storedRows(this.#c)
  }

  /** Writes rows another store's `storedRows` gave; loading the same rows again changes nothing. */
  loadRows(rows: readonly Record<string, unknown>[]): Promise<void> {
    return loadRows(this.#c, rows)
  }

  /** Receipts held, each counted once. */
  receiptCount(): Promise<number> {
    return receiptCount(this.#c)
  }

  async sourceActivity(sourceId: string, window: ActivityWindow): Promise<ActivityCounts[]> {
    return readSourceActivity(this.#c.client, sourceId, window)
  }

  async ping(): Promise<void> {
    await this.#rows('answering a ping', { query: 'SELECT 1 AS ok', params: {} })
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#recordedIds.clear()
    await this.#opening?.catch(() => {})
    const conn = this.#conn
    this.#conn = undefined
    await conn?.close()
  }
}

function filterOf(q: ReceiptFilter): ReceiptFilter {
  const { from, to, outcome, severity, token, status, source_id, agent_id, signal_id, source_ids } = q
  return Object.fromEntries(Object.entries({ from, to, outcome, severity, token, status, source_id, agent_id, signal_id, source_ids }).filter(([, v]) => v !== undefined)) as ReceiptFilter
}

function checkFilter(f: ReceiptFilter): void {
  for (const name of ['from', 'to'] as const) {
    const v = f[name]
    if (v !== undefined && (!Number.isSafeInteger(v) || v < 0)) throw invalid(`${name} must be an instant in milliseconds since the epoch`)
  }
}

function toReceipt(row: Row): Receipt {
  return { ...row, confidence: row.confidence === null ? null : Number(row.confidence), baseline: row.baseline === null ? null : Number(row.baseline), test: row.test === true || row.test === 1 }
}
