import type { RevocationScope } from '../../pipeline/index.js'
import type { SourceRecord } from '../../registry/index.js'
import { ApiError, checkUpdateSource, type RateCeiling } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { noBody, ownedSource, parseBody } from './access.js'
import { pageAfter } from './paging.js'
import { parseListing, parseManifest, sourceView } from './source-routes.js'

export const SOURCES_PAGE = { default: 50, max: 200 } as const

const LIST_QUERY = {
  creator_id: param.clientId,
  agent_id: param.clientId,
  state: param.oneOf(['live', 'retired'] as const),
  limit: param.limit(SOURCES_PAGE),
  cursor: param.cursor,
}

/**
 * A source's life after registration: the creator's list of its sources, a new manifest
 * or listing, and retirement. `ingestSettled` resolves once every signal that passed its
 * last check so far, on every gateway, has its answer: a retirement (and a new manifest)
 * is acknowledged only after it, so no 202 for the source follows it (or breaks it).
 */
export function registerSourceLifecycleRoutes(
  parts: JsonRoutesParts,
  baseUrl: () => string,
  rateCeiling: RateCeiling,
  ingestSettled: (scope: RevocationScope) => Promise<void>,
): void {
  const { registry } = parts

  // Oldest first. A creator sees its own sources only (a creator_id or agent_id of
  // another creator finds nothing); the admin sees every source.
  jsonRoute(parts, 'get', '/v1/byo/sources', { access: 'creator' }, ({ principal, query }) => {
    const { creator_id: creatorId, agent_id: agentId, state, limit, cursor } = parseQuery(query, LIST_QUERY)
    const own = principal.role === 'admin' ? undefined : principal.subject
    // The narrowest index that holds every match; sources are never dropped, so the
    // cursor (the last source id listed) is always found among them.
    const creator = own ?? creatorId
    const among = agentId !== undefined ? registry.sourcesOfAgent(agentId) : creator !== undefined ? registry.sourcesOfCreator(creator) : registry.sources()
    const keep = (s: SourceRecord) =>
      (own === undefined || s.creator_id === own) &&
      (creatorId === undefined || s.creator_id === creatorId) &&
      (state === undefined || (state === 'live') === (s.retired_at === null))
    const page = pageAfter(among, (s) => s.source_id, cursor, limit, keep)
    return { status: 200, data: page.items.map((s) => sourceView(s, baseUrl())), nextCursor: page.nextCursor }
  })

  // Each field given is replaced whole and checked as at registration. A new manifest is
  // acknowledged once every gateway holds it and has answered the requests it checked
  // against the old one (the revocation barrier), so a lower max_rate or a narrower
  // severity list applies on every gateway from the acknowledgement on.
  jsonRoute(parts, 'patch', '/v1/byo/sources/:source_id', { access: 'creator' }, async ({ principal, params, body }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const input = parseBody(checkUpdateSource, body)
    if (input.manifest === undefined && input.listing === undefined) throw new ApiError('invalid_request', 'give manifest, listing or both')
    const manifest = input.manifest === undefined ? undefined : parseManifest(input.manifest, rateCeiling)
    const listing = input.listing === undefined ? undefined : parseListing(input.listing)
    const updated = await registry.updateSource(source.source_id, { ...(manifest === undefined ? {} : { manifest }), ...(listing === undefined ? {} : { listing }) })
    if (manifest !== undefined) await ingestSettled({ sourceId: source.source_id })
    return { status: 200, data: sourceView(updated, baseUrl()) }
  })

  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/retire', { access: 'creator' }, async ({ principal, params, body }) => {
    noBody(body)
    const source = ownedSource(registry, principal, params[0] as string)
    const retired = await registry.retireSource(source.source_id)
    await ingestSettled({ sourceId: source.source_id })
    return { status: 200, data: sourceView(retired, baseUrl()) }
  })
}
