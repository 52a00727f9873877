import type { CursorPosition } from './receipt-cursor.js'
import type { ExportPosition, ReceiptFilter } from './receipt-store.js'

/**
 * The SQL of every read, with the caller's values only ever as typed parameters
 * ({name:Type}): nothing from a request is spliced into the text.
 *
 * Reads go through FINAL, which folds the rows written about one receipt (the recorder's,
 * a scorer's, a dispute's) into one before WHERE sees it: filters on the outcome or the
 * dispute status see the folded value, and no receipt is ever counted twice. Tuple parts
 * are read with tupleElement(): the `scoring.outcome` subcolumn syntax reads the stored
 * subcolumn of each row before the fold, and so misses the scoring row.
 */

/**
 * Whether the folded row holds the recorder's row: a dispute's row about a receipt not yet
 * recorded folds into no receipt. Tested on signal_id (never empty once recorded), not on
 * recorded_at, which the select list's alias of the same name would shadow in WHERE.
 */
const RECORDED = `signal_id != ''`
const SCORED = `toUnixTimestamp64Milli(tupleElement(scoring, 1)) != 0`
const DISPUTED = `tupleElement(dispute, 1) != 0`

/** The receipt fields in API order; `test` last, kept out of exports. */
const RECEIPT_COLUMNS = `receipt_id, source_id, agent_id, signal_id, key_id, token, severity, confidence, note,
  emitted_at, received_at, assumeNotNull(recorded_at) AS recorded_at,
  if(${SCORED}, tupleElement(scoring, 3), NULL) AS window_start,
  if(${SCORED}, tupleElement(scoring, 4), NULL) AS window_end,
  if(${SCORED}, tupleElement(scoring, 5), NULL) AS baseline,
  if(${SCORED}, tupleElement(scoring, 6), 'pending') AS outcome,
  if(${DISPUTED}, tupleElement(dispute, 3), 'none') AS dispute_status`

/** The folded values the outcome and status filters compare, for a statement that does not select every column. */
const FILTER_COLUMNS = `if(${SCORED}, tupleElement(scoring, 6), 'pending') AS outcome, if(${DISPUTED}, tupleElement(dispute, 3), 'none') AS dispute_status`

/** The columns of an export, in order: the CSV header line. */
export const EXPORT_COLUMNS = ['receipt_id', 'source_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'confidence', 'note', 'emitted_at', 'received_at', 'recorded_at', 'window_start', 'window_end', 'baseline', 'outcome', 'dispute_status'] as const

export interface Statement {
  readonly query: string
  readonly params: Record<string, unknown>
}

/** WHERE conditions and their parameters for a filter; every list and export starts from these. */
function conditions(filter: ReceiptFilter, includeTest: boolean): { where: string[]; params: Record<string, unknown> } {
  const where = [RECORDED]
  const params: Record<string, unknown> = {}
  const equal = (column: string, name: keyof ReceiptFilter, type = 'String') => {
    const value = filter[name]
    if (value === undefined) return
    where.push(`${column} = {${name}:${type}}`)
    params[name] = value
  }
  if (!includeTest) where.push('test = false')
  equal('source_id', 'source_id')
  if (filter.source_ids !== undefined) {
    where.push('source_id IN {source_ids:Array(String)}')
    params.source_ids = filter.source_ids
  }
  equal('agent_id', 'agent_id')
  equal('signal_id', 'signal_id')
  equal('severity', 'severity')
  equal('token', 'token')
  if (filter.from !== undefined) {
    where.push(`emitted_at >= fromUnixTimestamp64Milli({from:Int64}, 'UTC')`)
    params.from = filter.from
  }
  if (filter.to !== undefined) {
    where.push(`emitted_at < fromUnixTimestamp64Milli({to:Int64}, 'UTC')`)
    params.to = filter.to
  }
  if (filter.outcome !== undefined) {
    where.push(`outcome = {outcome:String}`)
    params.outcome = filter.outcome
  }
  if (filter.status !== undefined) {
    where.push(`dispute_status = {status:String}`)
    params.status = filter.status
  }
  return { where, params }
}

/**
 * The sort keys of one page, newest first; `limit + 1` are asked for, to know whether
 * another page follows. Only the key and filter columns are read (FINAL folds them all the
 * same), which is most of a page's cost; the page's rows are then read by `pageStatement`.
 */
export function pageKeysStatement(filter: ReceiptFilter, includeTest: boolean, after: CursorPosition | undefined, limit: number): Statement {
  const { where, params } = conditions(filter, includeTest)
  if (after !== undefined) {
    // (emitted_at, receipt_id) < the cursor's, spelt so the emitted_at bound also prunes granules.
    where.push(`emitted_at <= fromUnixTimestamp64Milli({after_at:Int64}, 'UTC')`)
    where.push(`(emitted_at < fromUnixTimestamp64Milli({after_at:Int64}, 'UTC') OR receipt_id < {after_id:String})`)
    params.after_at = after.emittedAtMs
    params.after_id = after.receiptId
  }
  params.limit = limit + 1
  return {
    query: `SELECT source_id, test, toUnixTimestamp64Milli(emitted_at) AS emitted_ms, receipt_id${filter.outcome !== undefined || filter.status !== undefined ? `, ${FILTER_COLUMNS}` : ''} FROM receipts FINAL WHERE ${where.join(' AND ')}
      ORDER BY emitted_at DESC, receipt_id DESC LIMIT {limit:UInt32}`,
    params,
  }
}

export interface ReceiptKey {
  readonly source_id: string
  readonly test: boolean | number
  readonly emitted_ms: number
  readonly receipt_id: string
}

/**
 * The rows of a page whose keys `pageKeysStatement` found, by primary key: the sources, the
 * span of emitted_at and the exact keys. The filter is applied again, so a receipt scored
 * or disputed out of the filter between the two reads is left out rather than shown
 * against it.
 */
export function pageStatement(filter: ReceiptFilter, includeTest: boolean, keys: readonly ReceiptKey[]): Statement {
  const { where, params } = conditions(filter, includeTest)
  const ms = keys.map((k) => Number(k.emitted_ms))
  where.push(`source_id IN {page_sources:Array(String)}`)
  where.push(`emitted_at >= fromUnixTimestamp64Milli({page_from:Int64}, 'UTC') AND emitted_at <= fromUnixTimestamp64Milli({page_to:Int64}, 'UTC')`)
  where.push(`receipt_id IN {page_ids:Array(String)}`)
  params.page_sources = [...new Set(keys.map((k) => k.source_id))]
  params.page_from = Math.min(...ms)
  params.page_to = Math.max(...ms)
  params.page_ids = keys.map((k) => k.receipt_id)
  return {
    query: `SELECT ${RECEIPT_COLUMNS}, test FROM receipts FINAL WHERE ${where.join(' AND ')}
      ORDER BY emitted_at DESC, receipt_id DESC`,
    params,
  }
}

/**
 * Every matching receipt in the table's own order (source_id, emitted_at, receipt_id, all
 * ascending), which ClickHouse reads part by part as it merges them, without sorting the
 * whole result first: memory stays flat however many rows go out. `after` starts strictly
 * after that row of the same order (test is false on every exported row, so it is left
 * out of the comparison), spelt with a source_id bound first so the primary key prunes.
 */
export function exportStatement(filter: ReceiptFilter, after?: ExportPosition): Statement {
  const { where, params } = conditions(filter, false)
  if (after !== undefined) {
    const at = `fromUnixTimestamp64Milli({after_at:Int64}, 'UTC')`
    where.push(`source_id >= {after_source:String}`)
    where.push(`(source_id > {after_source:String} OR emitted_at > ${at} OR (emitted_at = ${at} AND receipt_id > {after_id:String}))`)
    params.after_source = after.source_id
    params.after_at = after.emitted_at_ms
    params.after_id = after.receipt_id
  }
  return {
    query: `SELECT ${RECEIPT_COLUMNS} FROM receipts FINAL WHERE ${where.join(' AND ')}
      ORDER BY source_id, test, emitted_at, receipt_id`,
    params,
  }
}

/** The export's text columns; the others are numbers and timestamps. */
const EXPORT_TEXT_COLUMNS: ReadonlySet<string> = new Set(['receipt_id', 'source_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'note', 'outcome', 'dispute_status'])

/**
 * A text value a spreadsheet would not run as a formula: one that begins with `=`, `+`,
 * `-`, `@`, a tab or a carriage return gets a `'` in front (OWASP's advice on CSV
 * injection), so a creator's note `=HYPERLINK(...)` opens as text. NULL stays NULL.
 * Numbers are never touched: a negative baseline stays a number.
 */
function formulaSafe(column: string): string {
  return `if(substring(${column}, 1, 1) IN ('=', '+', '-', '@', '\\t', '\\r'), concat('''', ${column}), ${column}) AS ${column}`
}

/**
 * The CSV export: the export's rows with every text column made formula-safe. The select
 * list wraps the export query rather than rewriting its columns in place, where an alias
 * with a column's own name would also change what WHERE filters and ORDER BY sorts on;
 * ClickHouse folds the projection into the ordered read, so it still streams in order.
 */
export function csvExportStatement(filter: ReceiptFilter, after?: ExportPosition): Statement {
  const inner = exportStatement(filter, after)
  const columns = EXPORT_COLUMNS.map((c) => (EXPORT_TEXT_COLUMNS.has(c) ? formulaSafe(c) : c))
  return { query: `SELECT ${columns.join(', ')} FROM (${inner.query})`, params: inner.params }
}

export function getStatement(receiptId: string): Statement {
  return {
    query: `SELECT ${RECEIPT_COLUMNS}, test FROM receipts FINAL WHERE receipt_id = {receipt_id:String} AND ${RECORDED} LIMIT 1`,
    params: { receipt_id: receiptId },
  }
}

/** Which of `receiptIds` are recorded receipts: by the primary key of receipt_ids, a few granules per id. */
export function recordedStatement(receiptIds: readonly string[]): Statement {
  return {
    query: `SELECT DISTINCT receipt_id FROM receipt_ids WHERE receipt_id IN {receipt_ids:Array(String)}`,
    params: { receipt_ids: receiptIds },
  }
}

/**
 * Which of `receiptIds` the receipts table itself holds, narrowed by the batch's sources
 * and emitted_at range (the table's sort key) so the look-up reads a few granules.
 */
export function storedReceiptsStatement(sourceIds: readonly string[], receiptIds: readonly string[], fromMs: number, toMs: number): Statement {
  return {
    query: `SELECT DISTINCT receipt_id, source_id, test, toUnixTimestamp64Milli(emitted_at) AS emitted_ms FROM receipts
      WHERE source_id IN {source_ids:Array(String)} AND emitted_at >= fromUnixTimestamp64Milli({from_ms:Int64}, 'UTC')
        AND emitted_at <= fromUnixTimestamp64Milli({to_ms:Int64}, 'UTC') AND receipt_id IN {receipt_ids:Array(String)} AND signal_id != ''`,
    params: { source_ids: sourceIds, receipt_ids: receiptIds, from_ms: fromMs, to_ms: toMs },
  }
}

/** The sort key of receipts by id, to write a scoring row beside each. */
export function keysStatement(receiptIds: readonly string[]): Statement {
  return {
    query: `SELECT receipt_id, any(source_id) AS source_id, any(test) AS test, toUnixTimestamp64Milli(any(emitted_at)) AS emitted_ms FROM receipt_ids
      WHERE receipt_id IN {receipt_ids:Array(String)} GROUP BY receipt_id`,
    params: { receipt_ids: receiptIds },
  }
}
