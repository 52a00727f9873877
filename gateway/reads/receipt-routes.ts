import type { Receipt, ReceiptFilter, ReceiptStore } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { parseQuery } from '../http/query.js'
import type { ReceiptAccess, SourceAccess } from './receipt-access.js'
import { decodePublicCursor, encodePublicCursor, LIST_PARAMS, readQuery, type ReadQuery } from './receipt-params.js'
import { publicReceipt } from './receipt-view.js'
import { readRoute, type ReadRouteParts } from './read-route.js'

const notFound = (what: string) => new ApiError('not_found', `no such ${what}`)

type ListQuery = ReadQuery<typeof LIST_PARAMS>

function checkTest(q: ListQuery, operator: boolean): void {
  if (q.includeTest && !operator) throw new ApiError('invalid_request', 'include_test is for the source\'s creator and the admin')
}

/** A full view: the receipt as stored; `test` shows only to those who may ask for test receipts. */
const fullReceipt = (r: Receipt) => r

/**
 * One page of a source as `access` lets its reader see it. A public page is bounded by
 * the delay's cutoff, carried in its cursor from the first page.
 */
async function sourcePage(store: ReceiptStore, access: SourceAccess, q: ListQuery) {
  const { limit, cursor } = q.params
  const base: ReceiptFilter = { ...q.filter, source_id: access.source.source_id }
  if (access.view === 'full') {
    const page = await store.list({ ...base, limit, ...(cursor !== undefined && { cursor }), includeTest: q.includeTest })
    return { data: page.receipts.map(fullReceipt), next: page.next_cursor ?? null }
  }
  // The public view hides signal ids: filtering by one would tell whether it exists.
  if (q.filter.signal_id !== undefined) throw new ApiError('invalid_request', 'signal_id filters the full view only (the source\'s creator, a renter with an active rental, the admin); the public view hides signal ids')
  const latest = access.cutoffMs as number
  const walk = cursor === undefined ? { cutoffMs: latest, storeCursor: undefined } : decodePublicCursor(cursor, latest)
  const to = Math.min(q.filter.to ?? Number.MAX_SAFE_INTEGER, walk.cutoffMs)
  if (q.filter.from !== undefined && to <= q.filter.from) return { data: [], next: null }
  const page = await store.list({ ...base, to, limit, ...(walk.storeCursor !== undefined && { cursor: walk.storeCursor }) })
  return { data: page.receipts.map(publicReceipt), next: page.next_cursor === undefined ? null : encodePublicCursor(walk.cutoffMs, page.next_cursor) }
}

/**
 * The receipt reads. Lists are newest first (emitted_at descending, then receipt_id
 * descending) with a keyset cursor: the next page starts strictly after the last receipt
 * of this one, so a walk returns each receipt once, and receipts recorded meanwhile with a
 * newer emitted_at (ahead of the walk) do not shift it.
 */
export function registerReceiptRoutes(r: ReadRouteParts, store: ReceiptStore, access: ReceiptAccess): void {
  readRoute(r, '/v1/byo/sources/:source_id/receipts', async ({ reply, reader, params, query, admit }) => {
    const q = readQuery(query, false, LIST_PARAMS)
    const seen = access.source(reader, params[0] as string)
    // The allowance is taken before a 404, so unknown ids cannot be probed for free.
    await admit(seen?.rental?.rental_id)
    if (seen === undefined) throw notFound('source')
    checkTest(q, seen.operator)
    const page = await sourcePage(store, seen, q)
    reply.send(200, { ok: true, data: page.data, next_cursor: page.next })
  })

  readRoute(r, '/v1/byo/receipts', async ({ reply, reader, query, admit }) => {
    const q = readQuery(query, true, LIST_PARAMS)
    const { limit, cursor } = q.params
    if (reader.kind === 'public') {
      // Each public source has its own delay: the public reads one source at a time.
      if (q.filter.source_id === undefined) {
        await admit()
        throw new ApiError('invalid_request', 'source_id is required without a token: public receipts are read one source at a time')
      }
      const seen = access.source(reader, q.filter.source_id)
      await admit()
      if (seen === undefined) throw notFound('source')
      checkTest(q, false)
      const page = await sourcePage(store, seen, q)
      return reply.send(200, { ok: true, data: page.data, next_cursor: page.next })
    }
    await admit()
    const scope = access.fullScope(reader.principal)
    checkTest(q, scope.operator)
    if (scope.sourceIds !== undefined && scope.sourceIds.length === 0) return reply.send(200, { ok: true, data: [], next_cursor: null })
    const page = await store.list({ ...q.filter, ...(scope.sourceIds !== undefined && { source_ids: scope.sourceIds }), limit, ...(cursor !== undefined && { cursor }), includeTest: q.includeTest })
    reply.send(200, { ok: true, data: page.receipts.map(fullReceipt), next_cursor: page.next_cursor ?? null })
  })

  readRoute(r, '/v1/byo/receipts/:receipt_id', async ({ reply, reader, params, query, admit }) => {
    parseQuery(query, {})
    await admit()
    const receipt = await store.get(params[0] as string)
    const seen = receipt === undefined ? undefined : access.receipt(reader, receipt)
    if (receipt === undefined || seen === undefined) throw notFound('receipt')
    reply.send(200, { ok: true, data: seen.view === 'full' ? fullReceipt(receipt) : publicReceipt(receipt) })
  })
}
