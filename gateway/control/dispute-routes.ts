import type { DisputeRecord } from '../../registry/index.js'
import { ApiError } from '../../schemas/api-error.js'
import { checkOpenDispute, checkResolveDispute } from '../../schemas/control.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { ownedSource, parseBody } from './access.js'

/**
 * Spec 3.2 and 5.3 (compromise flow step 6): the source's operator disputes signals a
 * leaked key emitted before its revocation; the protocol review (the admin) accepts or
 * rejects the dispute, and an accepted one puts its signals in state `disputed`. They
 * stay in the log: the records there carry the raw body, the signature and the key id,
 * so the review can check each signal against the key without trusting the gateway.
 *
 * `hasAccepted` says whether the source accepted a signal id (the signal-id history).
 */
export function registerDisputeRoutes(parts: JsonRoutesParts, hasAccepted: (sourceId: string, signalId: string) => boolean): void {
  const { registry } = parts

  jsonRoute(parts, 'post', '/v1/byo/sources/:source_id/disputes', { access: 'creator' }, async ({ principal, params, body }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const input = parseBody(checkOpenDispute, body)
    const unknown = input.signal_ids.find((id) => !hasAccepted(source.source_id, id))
    if (unknown !== undefined) throw new ApiError('unknown_signal', `signal_id ${unknown} is not a signal this source had accepted`)
    const record = await registry.openDispute({
      sourceId: source.source_id,
      keyId: input.key_id,
      signalIds: input.signal_ids,
      evidence: input.evidence,
      openedBy: principal.subject,
    })
    return { status: 201, data: record satisfies DisputeRecord }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/disputes', { access: 'creator' }, ({ principal, params }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    // At most DISPUTE_LIMITS.perSource: one page.
    return { status: 200, data: registry.disputesOf(source.source_id), nextCursor: null }
  })

  jsonRoute(parts, 'get', '/v1/byo/sources/:source_id/disputes/:dispute_id', { access: 'creator' }, ({ principal, params }) => {
    const source = ownedSource(registry, principal, params[0] as string)
    const record = registry.dispute(source.source_id, params[1] as string)
    if (record === undefined) throw new ApiError('not_found', 'no such dispute for this source')
    return { status: 200, data: record }
  })

  for (const outcome of ['accepted', 'rejected'] as const) {
    const action = outcome === 'accepted' ? 'accept' : 'reject'
    jsonRoute(parts, 'post', `/v1/byo/sources/:source_id/disputes/:dispute_id/${action}`, { access: 'admin' }, async ({ principal, params, body }) => {
      const source = ownedSource(registry, principal, params[0] as string)
      const input = parseBody(checkResolveDispute, body)
      return { status: 200, data: await registry.resolveDispute(source.source_id, params[1] as string, outcome, input.resolution ?? null) }
    })
  }
}
