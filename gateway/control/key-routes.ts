import type { RevocationScope } from '../../pipeline/index.js'
import { parsePublicKey } from '../../registry/index.js'
import { ApiError, checkRegisterKey, checkRevokeKey } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { parseQuery } from '../http/query.js'
import { noBody, ownedSource, parseBody } from './access.js'

/**
 * A source's signing keys: register (pending), promote (after a test signal), revoke.
 * `ingestSettled` resolves once every signal that passed its last key check so far, on
 * every gateway, has its answer: a revocation is acknowledged only after it, so no 202
 * under the key follows.
 */
export function registerKeyRoutes(parts: JsonRoutesParts, ingestSettled: (scope: RevocationScope) => Promise<void>): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys', { access: 'creator' }, async ({ principal, params, body }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const input = parseBody(checkRegisterKey, body)
    const parsed = parsePublicKey(input.public_key)
    if (!parsed.ok) throw new ApiError('invalid_public_key', parsed.reason)
    return { status: 201, data: await registry.addKey(source.source_id, parsed.key) }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/keys', { access: 'creator' }, ({ principal, params, query }) => {
    // One page: a source holds at most 96 keys.
    parseQuery(query, {})
    const source = ownedSource(registry, principal, params[0] as string)
    return { status: 200, data: registry.keysOf(source.source_id), nextCursor: null }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/keys/:key_id', { access: 'creator' }, ({ principal, params }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const key = registry.key(source.source_id, params[1] as string)
    if (key === undefined) throw new ApiError('not_found', 'no such key for this source')
    return { status: 200, data: key.record }
  })

  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys/:key_id/promote', { access: 'creator' }, async ({ principal, params, body }) => {
    noBody(body)
    const source = ownedSource(registry, principal, params[0] as string)
    return { status: 200, data: await registry.promoteKey(source.source_id, params[1] as string) }
  })

  // An optional reason (rotation or compromise) is kept on the key record.
  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/keys/:key_id/revoke', { access: 'creator' }, async ({ principal, params, body }) => {
    const input = parseBody(checkRevokeKey, body)
    const source = ownedSource(registry, principal, params[0] as string)
    const revoked = await registry.revokeKey(source.source_id, params[1] as string, input.reason ?? null)
    await ingestSettled({ sourceId: source.source_id, keyId: revoked.key_id })
    return { status: 200, data: revoked }
  })
}
