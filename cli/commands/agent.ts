import type { Command } from 'commander'
import { gatewayCall, queryOf } from '../gateway-call.js'
import { fields, printResult, table } from '../output.js'
import { settingsOf } from '../settings.js'
import { positiveInt } from '../option-parsers.js'

/** `sgw agent create|list`: a creator's agents and their source slots (admin token). */
export function registerAgent(program: Command): void {
  const agent = program.command('agent').description("creators' agents and their source slots (admin token)")
  agent
    .command('create')
    .description('make an agent for a creator, with slots for its sources')
    .requiredOption('--agent-id <id>', 'the agent id (1 to 128 of A-Z a-z 0-9 _ : . -)')
    .requiredOption('--creator-id <id>', 'the subject of the creator token')
    .option('--slots <n>', 'how many sources it may hold (1 to 1,000)', positiveInt, 1)
    .action(async (o: { agentId: string; creatorId: string; slots: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', '/v1/admin/agents', { body: { agent_id: o.agentId, creator_id: o.creatorId, slots: o.slots } })
      printResult(s, data, () => fields(data))
    })
  agent
    .command('list')
    .description('agents, oldest first, with their slots in use')
    .option('--creator-id <id>', 'only this creator\'s')
    .option('--limit <n>', 'per page (1 to 1,000)', positiveInt)
    .option('--cursor <cursor>', 'the next page, from the previous one')
    .action(async (o: { creatorId?: string; limit?: number; cursor?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const page = await gatewayCall(s, 'GET', `/v1/admin/agents${queryOf({ creator_id: o.creatorId, limit: o.limit, cursor: o.cursor })}`)
      printResult(s, { data: page.data, next_cursor: page.next_cursor }, () => table(page.data, ['agent_id', 'creator_id', 'slots', 'slots_used', 'open_slots'], page.next_cursor))
    })
}
