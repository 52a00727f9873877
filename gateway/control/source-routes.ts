import type { SourceRecord } from '../../registry/index.js'
import { ApiError, checkCreateSource, checkManifest, Listing, type Manifest, PUBLIC_DELAY_DEFAULT_S, publicDelaySeconds, rateCeilingProblem, type RateCeiling, compileCheck } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { ownedAgent, ownedSource, parseBody } from './access.js'

const checkListing = compileCheck<Listing>(Listing, 'listing')

export function sourceView(source: SourceRecord, baseUrl: string) {
  return {
    source_id: source.source_id,
    agent_id: source.agent_id,
    creator_id: source.creator_id,
    manifest: source.manifest,
    // The delay shown as it applies, for a listing stored before the field existed too.
    listing: { ...source.listing, public_delay_seconds: publicDelaySeconds(source.listing) },
    created_at: source.created_at,
    updated_at: source.updated_at,
    state: source.retired_at === null ? 'live' : 'retired',
    retired_at: source.retired_at,
    ingest_endpoint: `${baseUrl}/v1/byo/sources/${source.source_id}/signals`,
    flagged_for_review: source.flagged_for_review_at !== null,
    flagged_for_review_at: source.flagged_for_review_at,
  }
}

/** A manifest as a client sent it, checked against its schema and the operator's rate ceiling: `400 invalid_manifest` naming the field. */
export function parseManifest(given: unknown, rateCeiling: RateCeiling): Manifest {
  if (given === undefined) throw new ApiError('invalid_manifest', 'manifest is required')
  const manifest = checkManifest(given)
  if (!manifest.ok) throw new ApiError('invalid_manifest', manifest.problem)
  const tooFast = rateCeilingProblem(manifest.value.max_rate, rateCeiling)
  if (tooFast !== undefined) throw new ApiError('invalid_manifest', tooFast)
  return manifest.value
}

/**
 * A listing as a client sent it: absent, or an object without public_receipts or
 * public_delay_seconds, takes their defaults (false, a day). null is no listing.
 */
export function parseListing(given: unknown): Listing {
  const object = given === undefined ? {} : given
  const listing = checkListing(typeof object === 'object' && object !== null && !Array.isArray(object) ? { public_receipts: false, public_delay_seconds: PUBLIC_DELAY_DEFAULT_S, ...object } : object)
  if (!listing.ok) throw new ApiError('invalid_request', listing.problem)
  return listing.value
}

/** Registering a source: the creator submits a manifest and gets back an ingest endpoint and a source id. */
export function registerSourceRoutes(parts: JsonRoutesParts, baseUrl: () => string, rateCeiling: RateCeiling): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/byo/sources', { access: 'creator' }, async ({ principal, body }) => {
    const input = parseBody(checkCreateSource, body)
    const agent = ownedAgent(registry, principal, input.agent_id)
    const manifest = parseManifest(input.manifest, rateCeiling)
    const listing = parseListing(input.listing)
    const source = await registry.createSource({ agent, manifest, listing })
    return { status: 201, data: sourceView(source, baseUrl()) }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id', { access: 'creator' }, ({ principal, params }) => {
    return { status: 200, data: sourceView(ownedSource(registry, principal, params[0] as string), baseUrl()) }
  })
}
