import { isReceiptStoreError } from '../../receipts/index.js'
import type { Registry } from '../../registry/index.js'
import { ApiError } from '../../schemas/index.js'
import { addressKey, type ClientAddresses } from '../client-address.js'
import { bearerPrincipal } from '../http/bearer.js'
import { getRoute, type JsonRoutesParts } from '../http/json-route.js'
import type { Reply } from '../http/reply.js'
import type { HttpRequest, HttpResponse } from '../http/uws.js'
import { ReceiptAccess, type Reader } from './receipt-access.js'
import type { ReadRateLimiter } from './read-rate-limiter.js'

export interface ReadRates {
  readonly anonymousPerMin: number
  readonly tokenPerMin: number
  readonly rentalPerMin: number
}

export interface ReadContext {
  readonly reply: Reply
  readonly res: HttpResponse
  readonly reader: Reader
  readonly params: readonly string[]
  readonly query: URLSearchParams
  /** Takes one read from the caller's allowance (by the rental it reads through, if any); 429 past it. */
  readonly admit: (rentalId?: string) => Promise<void>
}

export interface ReadRouteParts {
  readonly parts: JsonRoutesParts
  readonly clientAddresses: ClientAddresses
  readonly limiter: ReadRateLimiter
  readonly rates: ReadRates
}

/**
 * The reader of a request: no Authorization header is the public; one that names a valid
 * token is that token's principal; anything else (a bad, revoked or repeated credential)
 * is a 401, never the public, so a client with a broken token learns it.
 */
export function readerOf(registry: Registry, req: HttpRequest): Reader | undefined {
  let count = 0
  req.forEach((name) => {
    if (name === 'authorization') count++
  })
  if (count === 0) return { kind: 'public' }
  const principal = count === 1 ? bearerPrincipal(registry, req.getHeader('authorization')) : undefined
  return principal === undefined ? undefined : { kind: 'token', principal }
}

/** The receipt store's failures as API errors; anything else is left to become a 500. */
export function storeError(err: unknown): unknown {
  if (isReceiptStoreError(err, 'unavailable')) return new ApiError('receipts_unavailable', 'the receipt store is unavailable for a moment; retry', { retryAfter: 2, cause: err })
  if (isReceiptStoreError(err, 'invalid_cursor')) return new ApiError('invalid_request', err.message, { cause: err })
  if (isReceiptStoreError(err, 'invalid_argument')) return new ApiError('invalid_request', err.message, { cause: err })
  if (isReceiptStoreError(err, 'store_closed')) return new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1, cause: err })
  return err
}

/**
 * Registers a receipt read (GET and HEAD): authentication that lets the public in, the
 * read allowance, and errors as error bodies. The handler answers through `ctx.reply`
 * (or streams), or throws.
 */
export function readRoute(r: ReadRouteParts, pattern: string, handler: (ctx: ReadContext) => Promise<void>): void {
  const { parts } = r
  const paramCount = (pattern.match(/:/g) ?? []).length
  getRoute(parts, pattern, (reply, req, res) => {
    parts.track(reply)
    const params = Array.from({ length: paramCount }, (_, i) => decodeSegment(req.getParameter(i) ?? ''))
    const query = new URLSearchParams(req.getQuery() ?? '')
    const reader = readerOf(parts.registry, req)
    // Read now: uWS drops the request's headers once this handler returns.
    const client = r.clientAddresses.of(res, req)
    const fail = (err: unknown) => {
      const mapped = storeError(err)
      if (mapped instanceof ApiError) return reply.fail(mapped)
      parts.logger.error({ request_id: reply.requestId, err }, 'receipt read failed')
      reply.fail(new ApiError('internal_error', 'internal error; retry later'))
    }
    if (parts.isDraining()) return reply.fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }))
    if (reader === undefined) return reply.fail(new ApiError('unauthorized', 'the Authorization header does not hold a valid Bearer token (leave it out to read public receipts)'))
    const admit = async (rentalId?: string) => {
      const [key, perMin] = allowanceOf(reader, client, rentalId, r.rates)
      if (key === undefined) return
      const wait = await r.limiter.take(key, perMin)
      if (wait > 0) throw new ApiError('rate_limited', `over ${perMin} receipt reads a minute; retry in ${wait} s`, { retryAfter: wait })
    }
    Promise.resolve()
      .then(() => {
        ReceiptAccess.checkRole(reader)
        return handler({ reply, res, reader, params, query, admit })
      })
      .catch(fail)
  })
}

/** The allowance a read is taken from: its key and rate; no key for the admin, who is not limited. */
function allowanceOf(reader: Reader, client: Buffer, rentalId: string | undefined, rates: ReadRates): [string | undefined, number] {
  if (reader.kind === 'public') return [`a:${addressKey(client)}`, rates.anonymousPerMin]
  if (reader.principal.role === 'admin') return [undefined, 0]
  if (rentalId !== undefined) return [`r:${rentalId}`, rates.rentalPerMin]
  return [`t:${reader.principal.tokenId ?? reader.principal.subject}`, rates.tokenPerMin]
}

/** A path segment as the id it names (clients encode ids with encodeURIComponent). */
function decodeSegment(segment: string): string {
  if (!segment.includes('%')) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    return segment
  }
}
