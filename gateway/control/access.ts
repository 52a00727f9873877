import type { AgentRecord, Principal, Registry, SourceRecord } from '../../registry/index.js'
import type { RentalRecord, Rentals } from '../../rentals/index.js'
import { ApiError, type BodyCheck } from '../../schemas/index.js'

/** The admin, or the creator named by `creatorId`. */
const operates = (principal: Principal, creatorId: string) => principal.role === 'admin' || (principal.role === 'creator' && principal.subject === creatorId)

/**
 * The source if `principal` operates it (its creator) or is the admin. Anyone else
 * gets the same 404 as for a source that does not exist, so ids cannot be probed. A
 * retired source is found too, so its record and history stay readable; the registry
 * refuses the changes only a live source takes (`409 source_retired`).
 */
export function ownedSource(registry: Registry, principal: Principal, sourceId: string): SourceRecord {
  const source = registry.anySource(sourceId)
  if (source !== undefined && operates(principal, source.creator_id)) return source
  throw new ApiError('not_found', 'no such source')
}

/** `body` is undefined when the request had none: read as `{}`, so optional bodies may be left out. A JSON `null` is a body, and not an object. */
export function parseBody<T>(check: BodyCheck<T>, body: unknown): T {
  const result = check(body === undefined ? {} : body)
  if (!result.ok) throw new ApiError('invalid_request', result.problem)
  return result.value
}

/** For actions that take no input: no body, or `{}`; anything else is a mistake worth naming. */
export function noBody(body: unknown): void {
  if (body === undefined) return
  if (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0) return
  throw new ApiError('invalid_request', 'this endpoint takes no body (or {})')
}

/** The agent if `principal` is its creator or the admin; anyone else gets the 404 of a missing one. */
export function ownedAgent(registry: Registry, principal: Principal, agentId: string): AgentRecord {
  const agent = registry.agent(agentId)
  if (agent !== undefined && operates(principal, agent.creator_id)) return agent
  throw new ApiError('not_found', 'no such agent')
}

/**
 * The rental if `principal` (a renter: the routes let no other role in) is its renter;
 * another renter gets the 404 of a missing one. Roles that can never hold a rental
 * (admin, creator, metrics, scorer) are refused 403 by the route's access, like the
 * rental routes refuse every role but renter and admin: that tells them nothing about a rental.
 */
export function ownRental(rentals: Rentals, principal: Principal, rentalId: string): RentalRecord {
  const rental = rentals.get(rentalId)
  if (rental === undefined || principal.role !== 'renter' || rental.renter_id !== principal.subject) throw new ApiError('not_found', 'no such rental')
  return rental
}
