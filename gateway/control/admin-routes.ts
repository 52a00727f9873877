import type { TokenRecord } from '../../registry/index.js'
import { ApiError, checkCreateAgent, checkCreateToken } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { noBody, parseBody } from './access.js'
import { pageAfter } from './paging.js'

export const TOKENS_PAGE = { default: 100, max: 1000 } as const

/** A token record as shown: never the hash, which would let a leaked listing be brute-forced offline. */
export function tokenView(record: TokenRecord) {
  return { token_id: record.token_id, role: record.role, subject: record.subject, created_at: record.created_at, revoked_at: record.revoked_at }
}

const LIST_QUERY = {
  role: param.oneOf(['creator', 'renter', 'metrics', 'scorer'] as const),
  subject: param.clientId,
  state: param.oneOf(['live', 'revoked'] as const),
  limit: param.limit(TOKENS_PAGE),
  cursor: param.cursor,
}

/** Tokens and agents: issued by the operator (the admin token). */
export function registerAdminRoutes(parts: JsonRoutesParts): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/admin/tokens', { access: 'admin' }, async ({ body }) => {
    const input = parseBody(checkCreateToken, body)
    const { token, record } = await registry.createToken(input.role, input.subject)
    // The token is shown once; only its hash is kept.
    return { status: 201, data: { token, ...tokenView(record) } }
  })

  // Oldest first; how a token whose creation answer was lost is found again, and revoked.
  jsonRoute(parts, 'get', '/v1/admin/tokens', { access: 'admin' }, ({ query }) => {
    const { role, subject, state, limit, cursor } = parseQuery(query, LIST_QUERY)
    const keep = (r: TokenRecord) =>
      (role === undefined || r.role === role) && (subject === undefined || r.subject === subject) && (state === undefined || (state === 'live') === (r.revoked_at === null))
    // Timed: a revoked token's record is dropped past the bound, and a cursor naming it must still count.
    const page = pageAfter(registry.tokens(), (r) => r.token_id, cursor, limit, keep, (r) => Date.parse(r.created_at))
    return { status: 200, data: page.items.map(tokenView), nextCursor: page.nextCursor }
  })

  jsonRoute(parts, 'get', '/v1/admin/tokens/:token_id', { access: 'admin' }, ({ params }) => {
    const record = registry.token(params[0] as string)
    if (record === undefined) throw new ApiError('not_found', 'no such token')
    return { status: 200, data: tokenView(record) }
  })

  jsonRoute(parts, 'post', '/v1/admin/tokens/:token_id/revoke', { access: 'admin' }, async ({ params, body }) => {
    noBody(body)
    return { status: 200, data: tokenView(await registry.revokeToken(params[0] as string)) }
  })

  jsonRoute(parts, 'post', '/v1/admin/agents', { access: 'admin' }, async ({ body }) => {
    const agent = await registry.createAgent(parseBody(checkCreateAgent, body))
    return { status: 201, data: agent }
  })
}
