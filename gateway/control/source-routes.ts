import type { SourceRecord } from '../../registry/index.js'
import { ApiError, checkCreateSource, checkManifest, Listing, rateCeilingProblem, type RateCeiling, compileCheck } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { ownedAgent, ownedSource, parseBody } from './access.js'

const checkListing = compileCheck<Listing>(Listing, 'listing')

export function sourceView(source: SourceRecord, baseUrl: string) {
  return {
    source_id: source.source_id,
    agent_id: source.agent_id,
    creator_id: source.creator_id,
    manifest: source.manifest,
    listing: source.listing,
    created_at: source.created_at,
    ingest_endpoint: `${baseUrl}/v1/byo/sources/${source.source_id}/signals`,
    flagged_for_review: source.flagged_for_review_at !== null,
    flagged_for_review_at: source.flagged_for_review_at,
  }
}

/** Registration steps 3 and 4 of spec section 1: submit a manifest, get an endpoint and a source id. */
export function registerSourceRoutes(parts: JsonRoutesParts, baseUrl: () => string, rateCeiling: RateCeiling): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/byo/sources', { access: 'creator' }, async ({ principal, body }) => {
    const input = parseBody(checkCreateSource, body)
    const agent = ownedAgent(registry, principal, input.agent_id)
    if (input.manifest === undefined) throw new ApiError('invalid_manifest', 'manifest is required')
    const manifest = checkManifest(input.manifest)
    if (!manifest.ok) throw new ApiError('invalid_manifest', manifest.problem)
    const tooFast = rateCeilingProblem(manifest.value.max_rate, rateCeiling)
    if (tooFast !== undefined) throw new ApiError('invalid_manifest', tooFast)
    // Absent, or an object without public_receipts: its default (false). null is no listing.
    const given = input.listing === undefined ? {} : input.listing
    const listing = checkListing(typeof given === 'object' && given !== null && !Array.isArray(given) ? { public_receipts: false, ...given } : given)
    if (!listing.ok) throw new ApiError('invalid_request', listing.problem)
    const source = await registry.createSource({ agent, manifest: manifest.value, listing: listing.value })
    return { status: 201, data: sourceView(source, baseUrl()) }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id', { access: 'creator' }, ({ principal, params }) => {
    return { status: 200, data: sourceView(ownedSource(registry, principal, params[0] as string), baseUrl()) }
  })
}
