import { createHash } from 'node:crypto'
import { isReceiptId } from './receipt-id.js'
import type { ReceiptFilter } from './receipt-store.js'
import { ReceiptStoreError } from './receipt-store-error.js'

/** Where a page ended: the sort key of its last receipt. */
export interface CursorPosition {
  readonly emittedAtMs: number
  readonly receiptId: string
}

const VERSION = 1
/** Latest instant a receipt can carry (9999-12-31T23:59:59.999Z). */
const MAX_MS = 253_402_300_799_999

/**
 * The filters a cursor was made for, hashed: a cursor carried over to other filters would
 * start a walk at a position of a different list, so it is refused instead.
 */
function filterTag(filter: ReceiptFilter, includeTest: boolean): string {
  // signal_id only when given, so that the cursors of lists without it keep the tag they had before it existed.
  const parts = [filter.from, filter.to, filter.outcome, filter.severity, filter.token, filter.status, filter.source_id, filter.agent_id, includeTest, ...(filter.signal_id === undefined ? [] : [filter.signal_id])]
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url').slice(0, 12)
}

/** Opaque to clients: base64url of a small JSON array. */
export function encodeCursor(position: CursorPosition, filter: ReceiptFilter, includeTest: boolean): string {
  return Buffer.from(JSON.stringify([VERSION, position.emittedAtMs, position.receiptId, filterTag(filter, includeTest)])).toString('base64url')
}

export function decodeCursor(cursor: string, filter: ReceiptFilter, includeTest: boolean): CursorPosition {
  const invalid = (why: string) => new ReceiptStoreError('invalid_cursor', `cursor is not valid: ${why}`)
  if (cursor.length === 0 || cursor.length > 200 || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid('not a cursor this API returned')
  let value: unknown
  try {
    value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw invalid('not a cursor this API returned')
  }
  if (!Array.isArray(value) || value.length !== 4 || value[0] !== VERSION) throw invalid('not a cursor this API returned')
  const [, emittedAtMs, receiptId, tag] = value as unknown[]
  if (typeof emittedAtMs !== 'number' || !Number.isSafeInteger(emittedAtMs) || emittedAtMs < 0 || emittedAtMs > MAX_MS) throw invalid('not a cursor this API returned')
  if (typeof receiptId !== 'string' || !isReceiptId(receiptId)) throw invalid('not a cursor this API returned')
  if (tag !== filterTag(filter, includeTest)) throw invalid('it was made for other filters; start again without a cursor')
  return { emittedAtMs, receiptId }
}
