import type { Principal, Registry, SourceRecord } from '../../registry/index.js'
import { ApiError } from '../../schemas/api-error.js'
import type { BodyCheck } from '../../schemas/schema-problem.js'

/**
 * The source if `principal` operates it (its creator) or is the admin. Anyone else
 * gets the same 404 as for a source that does not exist, so ids cannot be probed.
 */
export function ownedSource(registry: Registry, principal: Principal, sourceId: string): SourceRecord {
  const source = registry.source(sourceId)
  if (source !== undefined && (principal.role === 'admin' || (principal.role === 'creator' && principal.subject === source.creator_id))) {
    return source
  }
  throw new ApiError('not_found', 'no such source')
}

export function parseBody<T>(check: BodyCheck<T>, body: unknown): T {
  const result = check(body ?? {})
  if (!result.ok) throw new ApiError('invalid_request', result.problem)
  return result.value
}
