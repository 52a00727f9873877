import type { AgentRecord } from '../../registry/index.js'
import { checkUpdateAgent } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { pageLimit, parseBody } from './access.js'
import { agentView } from './agent-routes.js'
import { pageAfter } from './paging.js'
import { closedQuery, idFilter } from './query.js'

export const AGENTS_PAGE = { default: 100, max: 1000 } as const

/** The operator's view of agents (the admin token): every agent, and its slots changed. */
export function registerAgentAdminRoutes(parts: JsonRoutesParts): void {
  const { registry } = parts

  // Oldest first; agents are never dropped, so the cursor (the last agent id listed) always counts.
  jsonRoute(parts, 'get', '/v1/admin/agents', { access: 'admin' }, ({ query }) => {
    closedQuery(query, ['creator_id', 'limit', 'cursor'])
    const creatorId = idFilter(query, 'creator_id')
    const limit = pageLimit(query, AGENTS_PAGE)
    const keep = (a: AgentRecord) => creatorId === null || a.creator_id === creatorId
    const page = pageAfter(registry.agents(), (a) => a.agent_id, query.get('cursor'), limit, keep)
    return { status: 200, data: page.items.map((a) => agentView(registry, a)), nextCursor: page.nextCursor }
  })

  jsonRoute(parts, 'patch', '/v1/admin/agents/:agent_id', { access: 'admin' }, async ({ params, body }) => {
    const input = parseBody(checkUpdateAgent, body)
    return { status: 200, data: agentView(registry, await registry.setAgentSlots(params[0] as string, input.slots)) }
  })
}
