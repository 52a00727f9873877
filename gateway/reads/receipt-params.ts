import { parseIsoUtc } from '../../pipeline/index.js'
import { DISPUTE_STATUSES, OUTCOMES, type ExportFormat, type ReceiptFilter } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { closedQuery, idFilter, oneOf } from '../control/query.js'

export const RECEIPTS_PAGE = { default: 100, max: 1000 } as const
export const EXPORT_FORMATS = ['ndjson', 'csv', 'parquet'] as const

const FILTERS = ['from', 'to', 'outcome', 'severity', 'token', 'status'] as const
/** Filters only the cross-source endpoints take. */
const CROSS_FILTERS = ['source_id', 'agent_id'] as const

export interface ReadQuery {
  readonly filter: ReceiptFilter
  readonly includeTest: boolean
}

function instant(query: URLSearchParams, name: 'from' | 'to'): number | undefined {
  const raw = query.get(name)
  if (raw === null) return undefined
  const ms = parseIsoUtc(raw)
  if (ms === undefined) throw new ApiError('invalid_request', `${name} must be an ISO 8601 UTC time, such as 2030-01-31T12:00:00Z`)
  return ms
}

function matching(query: URLSearchParams, name: string, pattern: RegExp, shape: string): string | undefined {
  const raw = query.get(name)
  if (raw === null) return undefined
  if (!pattern.test(raw)) throw new ApiError('invalid_request', `${name} must be ${shape}`)
  return raw
}

/**
 * The filters of a list or export, checked, every bad one `400 invalid_request` naming it.
 * `extra` names the other parameters the endpoint takes (limit, cursor, format).
 */
export function readQuery(query: URLSearchParams, options: { cross: boolean; extra: readonly string[] }): ReadQuery {
  closedQuery(query, [...FILTERS, ...(options.cross ? CROSS_FILTERS : []), 'include_test', ...options.extra])
  const from = instant(query, 'from')
  const to = instant(query, 'to')
  if (from !== undefined && to !== undefined && to <= from) throw new ApiError('invalid_request', 'to must be after from')
  const outcome = oneOf(query, 'outcome', OUTCOMES)
  const status = oneOf(query, 'status', DISPUTE_STATUSES)
  const severity = matching(query, 'severity', /^[A-Za-z0-9_-]{1,32}$/, '1 to 32 of A-Z a-z 0-9 _ -')
  const token = matching(query, 'token', /^[A-Za-z0-9]{1,128}$/, 'a token address: 1 to 128 letters and digits')
  const includeTest = oneOf(query, 'include_test', ['true', 'false'] as const) === 'true'
  const sourceId = options.cross ? idFilter(query, 'source_id') : null
  const agentId = options.cross ? idFilter(query, 'agent_id') : null
  const filter: ReceiptFilter = {
    ...(from !== undefined && { from }),
    ...(to !== undefined && { to }),
    ...(outcome !== null && { outcome }),
    ...(severity !== undefined && { severity }),
    ...(token !== undefined && { token }),
    ...(status !== null && { status }),
    ...(sourceId !== null && { source_id: sourceId }),
    ...(agentId !== null && { agent_id: agentId }),
  }
  return { filter, includeTest }
}

/** `limit`: 1 to 1,000, 100 when absent; digits only. */
export function listLimit(query: URLSearchParams): number {
  const raw = query.get('limit')
  if (raw === null) return RECEIPTS_PAGE.default
  const limit = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : Number.NaN
  if (!(limit >= 1 && limit <= RECEIPTS_PAGE.max)) throw new ApiError('invalid_request', `limit must be an integer from 1 to ${RECEIPTS_PAGE.max}`)
  return limit
}

export function exportFormat(query: URLSearchParams): ExportFormat {
  return oneOf(query, 'format', EXPORT_FORMATS) ?? 'ndjson'
}

const badCursor = (why = 'it is not one this endpoint returned') => new ApiError('invalid_request', `cursor is not valid: ${why}`)

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
