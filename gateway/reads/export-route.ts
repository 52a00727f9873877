import type { Logger } from 'pino'
import type { ExportFormat, ExportPosition, ReceiptFilter, ReceiptStore } from '../../receipts/index.js'
import type { Principal } from '../../registry/index.js'
import { ApiError } from '../../schemas/index.js'
import type { ReceiptAccess } from './receipt-access.js'
import { EXPORT_PARAMS, readQuery } from './receipt-params.js'
import { readRoute, storeError, type ReadContext, type ReadRouteParts } from './read-route.js'
import { ChunkedBodyWriter } from './chunked-body-writer.js'
import type { ExportFailures } from './export-failures.js'
import { RowCounter } from './row-counter.js'
import type { ExportSlots } from './export-slots.js'
import type { UsageMeter } from './usage-meter.js'

const CONTENT_TYPE: Record<ExportFormat, string> = { ndjson: 'application/x-ndjson', csv: 'text/csv; charset=utf-8', parquet: 'application/vnd.apache.parquet' }
/** How long a client refused for the export caps waits before trying again. */
const SLOTS_RETRY_AFTER_S = 5

export interface ExportParts {
  readonly store: ReceiptStore
  readonly access: ReceiptAccess
  readonly slots: ExportSlots
  readonly meter: UsageMeter
  readonly logger: Logger
  /** EXPORT_IDLE_TIMEOUT_MS: how long a full socket may wait for its reader before the export is cut. */
  readonly idleTimeoutMs: number
  readonly failures: ExportFailures
}

interface ExportQuery {
  readonly filter: ReceiptFilter
  readonly format: ExportFormat
  readonly after: ExportPosition | undefined
}

function exportQuery(query: URLSearchParams, cross: boolean): ExportQuery {
  const q = readQuery(query, cross, EXPORT_PARAMS)
  if (q.includeTest) throw new ApiError('invalid_request', 'include_test: exports never include test receipts')
  return { filter: q.filter, format: q.params.format, after: q.params.after }
}

/** Exports need a token: they are metered per caller, and the public reads through the lists. */
function tokenOf(ctx: ReadContext): Principal {
  if (ctx.reader.kind === 'public') throw new ApiError('unauthorized', 'exports need a valid Authorization: Bearer <token> header')
  return ctx.reader.principal
}

/**
 * Bulk export: every receipt the filters select, in the format ClickHouse writes, streamed
 * as the client reads. Each chunk is pulled from the store only once the connection took
 * the one before (ChunkedBodyWriter), so memory holds a chunk per export however large it
 * is; a client that goes away aborts the query, and one that stops reading is cut after
 * the idle timeout. Rows are metered per caller as they go out.
 */
export function registerExportRoutes(r: ReadRouteParts, e: ExportParts): void {
  readRoute(r, '/v1/byo/sources/:source_id/receipts/export', async (ctx) => {
    const principal = tokenOf(ctx)
    const q = exportQuery(ctx.query, false)
    const seen = e.access.source(ctx.reader, ctx.params[0] as string)
    await ctx.admit(seen?.rental?.rental_id)
    // The public view of a public source is read through the list, not exported.
    if (seen === undefined || seen.view !== 'full') throw new ApiError('not_found', 'no such source')
    await stream(ctx, e, principal, { ...q, filter: { ...q.filter, source_id: seen.source.source_id } }, seen.source.source_id)
  })

  readRoute(r, '/v1/byo/receipts/export', async (ctx) => {
    const principal = tokenOf(ctx)
    const q = exportQuery(ctx.query, true)
    await ctx.admit()
    const scope = e.access.fullScope(principal)
    await stream(ctx, e, principal, { ...q, filter: { ...q.filter, ...(scope.sourceIds !== undefined && { source_ids: scope.sourceIds }) } }, q.filter.source_id ?? 'all')
  })
}

async function stream(ctx: ReadContext, e: ExportParts, principal: Principal, q: ExportQuery, name: string): Promise<void> {
  const { reply, res } = ctx
  const { filter, format } = q
  const caller = { role: principal.role, subject: principal.subject }
  const slot = e.slots.take(`${caller.role}:${caller.subject}`)
  if ('refused' in slot) {
    const bound = slot.refused === 'caller' ? 'this caller has the most exports running at once' : 'the gateway runs the most exports it takes at once'
    throw new ApiError('rate_limited', `${bound}; retry when one has finished`, { retryAfter: SLOTS_RETRY_AFTER_S })
  }
  const headers: Record<string, string> = {
    'content-disposition': `attachment; filename="receipts-${name.replace(/[^A-Za-z0-9_.-]/g, '_')}-${new Date().toISOString().replace(/[:.]/g, '')}.${format}"`,
    'cache-control': 'no-store',
  }
  if (reply.head) {
    slot.release()
    return reply.sendText(200, CONTENT_TYPE[format], '')
  }
  const controller = new AbortController()
  const body = new ChunkedBodyWriter(res, e.idleTimeoutMs, (reason) => {
    e.failures.add(reason)
    e.logger.warn({ request_id: reply.requestId, reason, idle_ms: e.idleTimeoutMs }, 'receipt export cut: the client took nothing for the idle timeout; connection closed')
  })
  reply.onAbort = () => {
    controller.abort(new Error('the client went away'))
    body.close()
  }
  // An empty source set (a renter without an active rental) selects nothing: a file with no rows.
  const chunks = e.store.export(filter, format, controller.signal, q.after)[Symbol.asyncIterator]()
  const counter = new RowCounter(format, { csvHeader: q.after === undefined })
  let started = false
  try {
    // The first chunk before the status: a store that cannot answer gets a 503, not a cut 200.
    let next = await chunks.next()
    if (reply.aborted) return
    reply.streamStarted(200)
    res.cork(() => {
      res.writeStatus('200 OK')
      res.writeHeader('content-type', CONTENT_TYPE[format])
      res.writeHeader('x-request-id', reply.requestId)
      for (const [k, v] of Object.entries(headers)) res.writeHeader(k, v)
    })
    started = true
    while (!next.done) {
      const chunk = next.value
      // The next chunk is pulled from the store only once the socket has taken this one.
      if (!(await body.write(chunk)) || reply.aborted) return
      e.meter.add(caller, counter.add(chunk))
      next = await chunks.next()
      if (reply.aborted) return
    }
    e.meter.add(caller, counter.finish())
    body.end()
  } catch (err) {
    if (reply.aborted || controller.signal.aborted) return
    if (!started) throw storeError(err)
    // The status is out: the only way left to tell the client is to cut the transfer short.
    e.failures.add('store')
    e.logger.warn({ request_id: reply.requestId, err }, 'receipt export failed midway; connection closed')
    body.close()
    res.close()
  } finally {
    slot.release()
    if (!reply.aborted) controller.abort(new Error('export finished'))
    await chunks.return?.()?.catch(() => {})
    if (started) reply.streamEnded()
  }
}
