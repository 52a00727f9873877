import { parseIsoUtc, type OutcomeItem } from '../../pipeline/index.js'
import { isReceiptId, isReceiptStoreError, type OutcomeInput, type ReceiptStore } from '../../receipts/index.js'
import { ApiError, checkOutcomeItem, OUTCOMES_BODY_MAX_BYTES, OUTCOMES_PER_POST_MAX, SCORED_AT_SKEW_MS, type OutcomeRefusalCode } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'

/** One refused item of a post, named by its place in the post and the receipt it named. */
export interface RefusedOutcome {
  readonly index: number
  readonly receipt_id: string | null
  readonly code: OutcomeRefusalCode
  readonly message: string
}

/** Seconds a scorer waits before posting again when the receipt store cannot be reached. */
const STORE_RETRY_AFTER_S = 5

/**
 * The receipt store's failures as API errors: unreachable or overloaded is 503 with
 * Retry-After (nothing of the post was stored, so the same post may simply be sent again);
 * anything else is the gateway's fault, a 500.
 */
export function storeFailure(err: unknown): unknown {
  if (isReceiptStoreError(err, 'unavailable')) return new ApiError('overloaded', 'the receipt store is unavailable; retry', { retryAfter: STORE_RETRY_AFTER_S, cause: err })
  if (isReceiptStoreError(err, 'store_closed')) return new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 })
  return err
}

/**
 * Checks each item on its own, so one bad item never fails the post: the items worth
 * storing (times written back in the store's one form) with their place in the post, and
 * every refused item with why.
 */
export function sortOutcomeItems(items: readonly unknown[], nowMs: number): { valid: { index: number; input: OutcomeInput }[]; refused: RefusedOutcome[] } {
  const valid: { index: number; input: OutcomeInput }[] = []
  const refused: RefusedOutcome[] = []
  // A second verdict on one receipt in one post has no order to settle it: refused, the first kept.
  const firstIndex = new Map<string, number>()
  items.forEach((raw, index) => {
    const named = typeof raw === 'object' && raw !== null && typeof (raw as { receipt_id?: unknown }).receipt_id === 'string' ? ((raw as { receipt_id: string }).receipt_id.slice(0, 128)) : null
    const refuse = (code: OutcomeRefusalCode, message: string) => refused.push({ index, receipt_id: named, code, message })
    const checked = checkOutcomeItem(raw)
    if (!checked.ok) return refuse('invalid_item', checked.problem)
    const item = checked.value
    if (!isReceiptId(item.receipt_id)) return refuse('invalid_item', 'receipt_id is not a receipt id (rc_ and 32 lowercase hex digits)')
    const start = parseIsoUtc(item.window_start)
    const end = parseIsoUtc(item.window_end)
    const scored = parseIsoUtc(item.scored_at)
    if (start === undefined) return refuse('invalid_item', 'window_start must be an ISO 8601 UTC time')
    if (end === undefined) return refuse('invalid_item', 'window_end must be an ISO 8601 UTC time')
    if (scored === undefined) return refuse('invalid_item', 'scored_at must be an ISO 8601 UTC time')
    if (end < start) return refuse('invalid_item', 'window_end is before window_start')
    // JSON has no infinity, but 1e999 parses as one.
    if (!Number.isFinite(item.baseline)) return refuse('invalid_item', 'baseline must be a finite number')
    if (scored > nowMs + SCORED_AT_SKEW_MS) return refuse('invalid_item', `scored_at is more than ${SCORED_AT_SKEW_MS / 1000} seconds in the future`)
    const first = firstIndex.get(item.receipt_id)
    if (first !== undefined) return refuse('duplicate_item', `the receipt is scored earlier in this post, at index ${first}`)
    firstIndex.set(item.receipt_id, index)
    const iso = (ms: number) => new Date(ms).toISOString()
    valid.push({ index, input: { receipt_id: item.receipt_id, window_start: iso(start), window_end: iso(end), baseline: item.baseline, outcome: item.outcome, scored_at: iso(scored) } })
  })
  return { valid, refused }
}

/**
 * Appends a post's stored items to the signal log (pipeline/outcome-record.ts), where the
 * receipt log gives each verdict that changes a receipt its leaf; resolves once durable.
 */
export type LogOutcomes = (items: readonly OutcomeItem[]) => Promise<void>

/**
 * `POST /v1/scoring/outcomes`: the scoring service's verdicts, up to 1,000 at once, from a
 * scorer token (or the admin token). The answer names each refused item; the others are
 * stored. Posting the same items again changes nothing; of two verdicts on one receipt
 * the newer scored_at wins, whichever arrives first.
 *
 * The stored items are then appended to the signal log, and the answer waits for that:
 * a 200 means each verdict has its place in the receipt log's order. The store comes
 * first because only it knows which receipts exist. When the append fails the scorer gets
 * 503 and posts again: the store takes the same items again with no change, and the new
 * record gives the receipt log what the failed one would have.
 */
export function registerScoringRoutes(parts: JsonRoutesParts, receipts: ReceiptStore, logOutcomes: LogOutcomes, now: () => number): void {
  jsonRoute(parts, 'post', '/v1/scoring/outcomes', { access: 'scorer', maxBodyBytes: OUTCOMES_BODY_MAX_BYTES }, async ({ body }) => {
    if (!Array.isArray(body)) throw new ApiError('invalid_request', `body must be a JSON array of 1 to ${OUTCOMES_PER_POST_MAX} outcome items`)
    if (body.length === 0 || body.length > OUTCOMES_PER_POST_MAX) throw new ApiError('invalid_request', `body must hold 1 to ${OUTCOMES_PER_POST_MAX} outcome items (it holds ${body.length})`)
    const { valid, refused } = sortOutcomeItems(body, now())
    let accepted = 0
    if (valid.length > 0) {
      let result
      try {
        result = await receipts.recordOutcomes(valid.map((v) => v.input))
      } catch (err) {
        throw storeFailure(err)
      }
      accepted = result.accepted
      const refusedByStore = new Set<number>()
      for (const r of result.refused) {
        refusedByStore.add(r.index)
        const index = valid[r.index]?.index ?? r.index
        // The store's own checks repeat ours; what it alone can tell is whether the receipt exists.
        refused.push({ index, receipt_id: r.receipt_id, code: r.reason, message: r.reason === 'unknown_receipt' ? 'no such receipt' : r.message })
      }
      const stored = valid.filter((_, i) => !refusedByStore.has(i)).map((v) => v.input)
      if (stored.length > 0) {
        try {
          await logOutcomes(stored)
        } catch (err) {
          throw new ApiError('not_ready', 'the signal log is unavailable; post the same items again', { cause: err, retryAfter: 1 })
        }
      }
    }
    refused.sort((a, b) => a.index - b.index)
    return { status: 200, data: { accepted, refused } }
  })
}
