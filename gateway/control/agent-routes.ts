import type { AgentRecord, Registry } from '../../registry/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { ownedAgent } from './access.js'
import { pageAfter } from './paging.js'
import { sourceView } from './source-routes.js'

export const AGENT_SOURCES_PAGE = { default: 50, max: 200 } as const

/** An agent as shown: with the slots its live sources take and those still open. */
export function agentView(registry: Registry, agent: AgentRecord) {
  const used = registry.slotsUsed(agent.agent_id)
  return { ...agent, slots_used: used, open_slots: Math.max(0, agent.slots - used) }
}

/**
 * An agent and its sources, for its creator (and the admin). Besides being what a
 * creator expects to read back, it is how a source is found again when the answer to
 * its creation never arrived (a dropped connection): without it the slot would be
 * taken by a source nobody can name.
 */
export function registerAgentRoutes(parts: JsonRoutesParts, baseUrl: () => string): void {
  const { registry } = parts

  jsonRoute(parts, 'get', '/v1/byo/agents/:agent_id', { access: 'creator' }, ({ principal, params }) => {
    return { status: 200, data: agentView(registry, ownedAgent(registry, principal, params[0] as string)) }
  })

  // Oldest first; the cursor is the last source id of the previous page.
  jsonRoute(parts, 'get', '/v1/byo/agents/:agent_id/sources', { access: 'creator' }, ({ principal, params, query }) => {
    const { limit, cursor } = parseQuery(query, { limit: param.limit(AGENT_SOURCES_PAGE), cursor: param.cursor })
    const agent = ownedAgent(registry, principal, params[0] as string)
    const page = pageAfter(registry.sourcesOfAgent(agent.agent_id), (s) => s.source_id, cursor, limit)
    return { status: 200, data: page.items.map((s) => sourceView(s, baseUrl())), nextCursor: page.nextCursor }
  })
}
