import type { AgentRecord } from '../../registry/index.js'
import { checkUpdateAgent } from '../../schemas/index.js'
import { jsonRoute, type JsonRoutesParts } from '../http/json-route.js'
import { param, parseQuery } from '../http/query.js'
import { parseBody } from './access.js'
import { agentView } from './agent-routes.js'
import { pageAfter } from './paging.js'

export const AGENTS_PAGE = { default: 100, max: 1000 } as const

/** The operator's view of agents (the admin token): every agent, and its slots changed. */
export function registerAgentAdminRoutes(parts: JsonRoutesParts): void {
  const { registry } = parts

  // Oldest first; agents are never dropped, so the cursor (the last agent id listed) always counts.
  jsonRoute(parts, 'get', '/v1/admin/agents', { access: 'admin' }, ({ query }) => {
    const { creator_id: creatorId, limit, cursor } = parseQuery(query, { creator_id: param.clientId, limit: param.limit(AGENTS_PAGE), cursor: param.cursor })
    const keep = (a: AgentRecord) => creatorId === undefined || a.creator_id === creatorId
    const page = pageAfter(registry.agents(), (a) => a.agent_id, cursor, limit, keep)
    return { status: 200, data: page.items.map((a) => agentView(registry, a)), nextCursor: page.nextCursor }
  })

  jsonRoute(parts, 'patch', '/v1/admin/agents/:agent_id', { access: 'admin' }, async ({ params, body }) => {
    const input = parseBody(checkUpdateAgent, body)
    return { status: 200, data: agentView(registry, await registry.setAgentSlots(params[0] as string, input.slots)) }
  })
}
