import { parseIsoUtc } from '../../pipeline/index.js'
import { DISPUTE_STATUSES, isReceiptId, OUTCOMES, type ExportPosition, type ReceiptFilter } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { badCursor, optional, param, parseQuery, withDefault, type ParsedQuery, type QueryRules } from '../http/query.js'

export const RECEIPTS_PAGE = { default: 100, max: 1000 } as const
export const EXPORT_FORMATS = ['ndjson', 'csv', 'parquet'] as const

/** The filters of every receipt list and export. */
const FILTERS = {
  from: param.instant,
  to: param.instant,
  outcome: param.oneOf(OUTCOMES),
  severity: param.matching(/^[A-Za-z0-9_-]{1,32}$/, '1 to 32 of A-Z a-z 0-9 _ -'),
  token: param.matching(/^[A-Za-z0-9]{1,128}$/, 'a token address: 1 to 128 letters and digits'),
  status: param.oneOf(DISPUTE_STATUSES),
  signal_id: param.matching(/^[A-Za-z0-9_:-]{8,128}$/, 'a signal id: 8 to 128 of A-Z a-z 0-9 _ - :'),
  include_test: param.flag,
}
/** Filters only the cross-source endpoints take. */
const CROSS_FILTERS = { source_id: param.sourceId, agent_id: param.clientId }

/** The other parameters of a list. */
export const LIST_PARAMS = { limit: param.limit(RECEIPTS_PAGE), cursor: param.cursor }
const SOURCE_ID = /^src_[A-Za-z0-9_-]{16}$/

/**
 * Where a continued export starts: the last row the client holds, as
 * `<source_id>,<emitted_at>,<receipt_id>` (the columns the export's order sorts on, as the
 * row shows them). A position is a place in the order, not a thing: one that names no
 * receipt is still a place, so it reveals nothing about which receipts exist.
 */
const exportAfter = optional((raw, name): ExportPosition => {
  const [sourceId, emittedAt, receiptId, extra] = raw.split(',')
  const emittedAtMs = emittedAt === undefined ? undefined : parseIsoUtc(emittedAt)
  if (extra !== undefined || sourceId === undefined || !SOURCE_ID.test(sourceId) || emittedAtMs === undefined || receiptId === undefined || !isReceiptId(receiptId)) {
    throw new ApiError('invalid_request', `${name} must be the last row's source_id,emitted_at,receipt_id, such as src_Zwx9z_P5b8MBlr0z,2030-01-31T12:00:00.000Z,rc_0123456789abcdef0123456789abcdef`)
  }
  return { source_id: sourceId, emitted_at_ms: emittedAtMs, receipt_id: receiptId }
})

/** The other parameters of an export. */
export const EXPORT_PARAMS = { format: withDefault(param.oneOf(EXPORT_FORMATS), 'ndjson'), after: exportAfter }

export interface ReadQuery<E extends QueryRules> {
  readonly filter: ReceiptFilter
  readonly includeTest: boolean
  /** The endpoint's other parameters (`extra`), parsed. */
  readonly params: ParsedQuery<E>
}

/**
 * The query of a receipt list or export (parseQuery's rules): the filters, those across
 * sources where `cross`, and the endpoint's `extra` parameters (limit and cursor, or format).
 */
export function readQuery<E extends QueryRules>(query: URLSearchParams, cross: boolean, extra: E): ReadQuery<E> {
  const rules: QueryRules = { ...FILTERS, ...(cross ? CROSS_FILTERS : {}), ...extra }
  const p = parseQuery(query, rules) as ParsedQuery<typeof FILTERS> & Partial<ParsedQuery<typeof CROSS_FILTERS>>
  const { from, to, outcome, severity, token, status, signal_id: signalId, source_id: sourceId, agent_id: agentId } = p
  if (from !== undefined && to !== undefined && to <= from) throw new ApiError('invalid_request', 'to must be after from')
  const filter: ReceiptFilter = {
    ...(from !== undefined && { from }),
    ...(to !== undefined && { to }),
    ...(outcome !== undefined && { outcome }),
    ...(severity !== undefined && { severity }),
    ...(token !== undefined && { token }),
    ...(status !== undefined && { status }),
    ...(signalId !== undefined && { signal_id: signalId }),
    ...(sourceId !== undefined && { source_id: sourceId }),
    ...(agentId !== undefined && { agent_id: agentId }),
  }
  return { filter, includeTest: p.include_test, params: p as unknown as ParsedQuery<E> }
}

/**
 * A public page's cursor carries the cutoff its walk started with, so the next pages ask
 * the store for the same filters (a cutoff moving with the clock would make every cursor
 * stale) and a receipt that came of age meanwhile cannot slip in behind the walk's position.
 * A cutoff later than the listing allows now (a forged cursor, or a delay raised since) is
 * refused: the cursor can never reveal a receipt younger than the delay.
 */
export function encodePublicCursor(cutoffMs: number, storeCursor: string): string {
  return `${cutoffMs.toString(36)}.${storeCursor}`
}

export function decodePublicCursor(cursor: string, latestCutoffMs: number): { cutoffMs: number; storeCursor: string } {
  const dot = cursor.indexOf('.')
  const head = cursor.slice(0, dot)
  if (dot <= 0 || !/^[0-9a-z]{1,11}$/.test(head)) throw badCursor()
  const cutoffMs = parseInt(head, 36)
  if (cutoffMs > latestCutoffMs) throw badCursor('the source\'s public delay changed; start again without a cursor')
  return { cutoffMs, storeCursor: cursor.slice(dot + 1) }
}
