import { LogKeyLimitError, parseTilePath, ReceiptLogError, type LogKeys, type ReceiptLogReader, type ReceiptLogStore } from '../../receipt-log/index.js'
import type { ReceiptStore } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { noBody } from '../control/access.js'
import { getRoute, jsonRoute } from '../http/json-route.js'
import { parseQuery, type QueryRule } from '../http/query.js'
import type { Reply } from '../http/reply.js'
import type { ReceiptAccess } from './receipt-access.js'
import { readRoute, storeError, type ReadRouteParts } from './read-route.js'

export interface LogRouteOptions {
  readonly reader: ReceiptLogReader
  readonly store: ReceiptLogStore
  readonly keys: LogKeys
  /** RECEIPT_LOG_KEY_OVERLAP_S in ms: how long a replaced log key keeps signing. */
  readonly keyOverlapMs: number
}

/** A full tile never changes: cached for a year, immutable. A partial one is superseded as the log grows. */
const FULL_TILE_CACHE = 'public, max-age=31536000, immutable'
const PARTIAL_TILE_CACHE = 'public, max-age=60'

const size: QueryRule<number> = (raw, name) => {
  if (raw === undefined || !/^(0|[1-9][0-9]{0,15})$/.test(raw) || !Number.isSafeInteger(Number(raw))) throw new ApiError('invalid_request', `${name} must be a tree size: a whole number`)
  return Number(raw)
}

const notYetLogged = (err: unknown) =>
  err instanceof ReceiptLogError && err.code === 'not_yet_logged' ? new ApiError('not_yet_logged', err.message, { retryAfter: 1, cause: err }) : err

/** An error of a plain route (no read allowance): the store's as API errors, others logged as 500. */
function failWith(reply: Reply, parts: ReadRouteParts['parts'], err: unknown): void {
  const mapped = storeError(err)
  if (mapped instanceof ApiError) return reply.fail(mapped)
  parts.logger.error({ request_id: reply.requestId, err }, 'receipt log read failed')
  reply.fail(new ApiError('internal_error', 'internal error; retry later'))
}

/**
 * The receipt log's read surface. The checkpoint, the keys and the tiles are public and
 * cheap (memory), served outside the receipt read allowance so mirrors can copy the
 * tiles; a receipt's proof goes through the read allowance and the receipt's access rules:
 * its whole bundle (the creator's signed request and the salts of the leaf's commitments)
 * only for readers who see the whole receipt, the leaf and proofs for the public.
 */
export function registerLogRoutes(r: ReadRouteParts, receipts: ReceiptStore, access: ReceiptAccess, o: LogRouteOptions): void {
  const { parts } = r
  const plain = (pattern: string, handler: (reply: Reply, url: string, query: URLSearchParams) => Promise<void>) =>
    getRoute(parts, pattern, (reply, req) => {
      parts.track(reply)
      const url = req.getUrl()
      const query = new URLSearchParams(req.getQuery() ?? '')
      if (parts.isDraining()) return reply.fail(new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 }))
      handler(reply, url, query).catch((err: unknown) => failWith(reply, parts, err))
    })

  plain('/v1/log/checkpoint', async (reply, _url, query) => {
    parseQuery(query, {})
    const cp = await o.reader.latest()
    if (cp === undefined) throw new ApiError('not_found', 'the receipt log has no checkpoint yet')
    reply.sendBody(200, 'text/plain; charset=utf-8', cp.note, { 'cache-control': 'no-cache' })
  })

  plain('/v1/log/key', async (reply, _url, query) => {
    parseQuery(query, {})
    reply.sendBody(200, 'text/plain; charset=utf-8', `${await o.keys.current()}\n`, { 'cache-control': 'no-cache' })
  })

  plain('/v1/log/keys', async (reply, _url, query) => {
    parseQuery(query, {})
    const [keys, sizes] = await Promise.all([o.keys.published(), o.store.keySizes()])
    const signed = new Map(sizes.map((s) => [s.key_id, s]))
    const data = keys.map((k) => {
      const s = signed.get(k.key_id)
      return { ...k, first_size: s?.first_size ?? null, last_size: s?.last_size ?? null, checkpoints: s?.checkpoints ?? 0 }
    })
    reply.send(200, { ok: true, data })
  })

  plain('/v1/log/tile/*', async (reply, url) => {
    const t = parseTilePath(url.slice('/v1/log/tile/'.length))
    if (t === undefined) throw new ApiError('not_found', 'no such tile: tile/<L>/<N>[.p/<W>] or tile/entries/<N>[.p/<W>], N in x-prefixed groups of three digits')
    const body = await o.reader.tile(t)
    if (body === undefined) throw new ApiError('not_found', 'the log does not reach that tile yet')
    reply.sendBody(200, 'application/octet-stream', body.bytes, { 'cache-control': body.immutable ? FULL_TILE_CACHE : PARTIAL_TILE_CACHE })
  })

  readRoute(r, '/v1/log/consistency', async ({ reply, query, admit }) => {
    const q = parseQuery(query, { from: size, to: size })
    await admit()
    if (q.from > q.to) throw new ApiError('invalid_request', 'from must not be larger than to')
    try {
      const proof = await o.reader.consistency(q.from, q.to)
      reply.send(200, { ok: true, data: { proof: proof.map((h) => h.toString('base64')) } })
    } catch (err) {
      if (err instanceof ReceiptLogError) throw new ApiError('invalid_request', err.message, { cause: err })
      throw err
    }
  })

  readRoute(r, '/v1/byo/receipts/:receipt_id/proof', async ({ reply, reader, params, query, admit }) => {
    parseQuery(query, {})
    await admit()
    const receipt = await receipts.get(params[0] as string)
    const seen = receipt === undefined ? undefined : access.receipt(reader, receipt)
    if (receipt === undefined || seen === undefined) throw new ApiError('not_found', 'no such receipt')
    const logged = await o.reader.proof(receipt.receipt_id).catch((err: unknown) => {
      throw notYetLogged(err)
    })
    if (logged === undefined) throw new ApiError('not_found', 'a test receipt is not in the receipt log')
    const publicPart = {
      leaf_index: logged.leafIndex,
      leaf: logged.leaf.toString('base64'),
      inclusion_proof: logged.inclusionProof.map((h) => h.toString('base64')),
      checkpoint: logged.checkpoint,
    }
    if (seen.view !== 'full') return reply.send(200, { ok: true, data: publicPart })
    const q = logged.request
    const request = {
      method: q.method,
      path: q.path,
      timestamp: q.timestamp,
      nonce: q.nonce,
      body: Buffer.from(q.body, 'utf8').toString('base64'),
      key_id: q.key_id,
      signature: q.signature,
      public_key: q.public_key,
    }
    reply.send(200, { ok: true, data: { ...publicPart, request, salts: JSON.parse(q.salts) as Record<string, string> } })
  })

  jsonRoute(parts, 'post', '/v1/admin/log-keys/rotate', { access: 'admin' }, async ({ body }) => {
    noBody(body)
    try {
      return { status: 200, data: await o.keys.rotate(o.keyOverlapMs) }
    } catch (err) {
      if (err instanceof LogKeyLimitError) throw new ApiError('limit_exceeded', err.message, { cause: err })
      throw err
    }
  })
}
