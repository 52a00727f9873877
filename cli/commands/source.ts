import type { Command } from 'commander'
import { enc, gatewayCall, queryOf } from '../gateway-call.js'
import { usageError } from '../exit-codes.js'
import { jsonObject, positiveInt } from '../option-parsers.js'
import { fields, printResult, table } from '../output.js'
import { settingsOf } from '../settings.js'

const COLUMNS = ['source_id', 'agent_id', 'state', 'created_at', 'ingest_endpoint']

/** `sgw source create|list|update|retire`: a creator's sources (creator token, or the admin's). */
export function registerSource(program: Command): void {
  const source = program.command('source').description('sources under your agents (creator token)')
  source
    .command('create')
    .description('register a source in an open slot of an agent')
    .requiredOption('--agent-id <id>')
    .requiredOption('--manifest <json>', 'the manifest, inline JSON or @file', jsonObject)
    .option('--listing <json>', 'the listing, inline JSON or @file', jsonObject)
    .action(async (o: { agentId: string; manifest: object; listing?: object }, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', '/v1/byo/sources', { body: { agent_id: o.agentId, manifest: o.manifest, ...(o.listing && { listing: o.listing }) } })
      printResult(s, data, () => fields(data))
    })
  source
    .command('list')
    .description('your sources, oldest first')
    .option('--agent-id <id>')
    .option('--creator-id <id>', 'admin token: one creator\'s')
    .option('--state <state>', 'live or retired')
    .option('--limit <n>', 'per page (1 to 200)', positiveInt)
    .option('--cursor <cursor>', 'the next page, from the previous one')
    .action(async (o: { agentId?: string; creatorId?: string; state?: string; limit?: number; cursor?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const page = await gatewayCall(s, 'GET', `/v1/byo/sources${queryOf({ agent_id: o.agentId, creator_id: o.creatorId, state: o.state, limit: o.limit, cursor: o.cursor })}`)
      printResult(s, { data: page.data, next_cursor: page.next_cursor }, () => table(page.data, COLUMNS, page.next_cursor))
    })
  source
    .command('update')
    .description('replace the manifest or the listing (archetype and schema_version stay)')
    .argument('<source_id>')
    .option('--manifest <json>', 'inline JSON or @file', jsonObject)
    .option('--listing <json>', 'inline JSON or @file', jsonObject)
    .action(async (sourceId: string, o: { manifest?: object; listing?: object }, cmd: Command) => {
      const s = settingsOf(cmd)
      if (o.manifest === undefined && o.listing === undefined) throw usageError('give --manifest, --listing or both')
      const { data } = await gatewayCall(s, 'PATCH', `/v1/byo/sources/${enc(sourceId)}`, { body: { ...(o.manifest && { manifest: o.manifest }), ...(o.listing && { listing: o.listing }) }, idempotent: true })
      printResult(s, data, () => fields(data))
    })
  source
    .command('retire')
    .description('retire a source for good; its slot is free at once')
    .argument('<source_id>')
    .action(async (sourceId: string, _o: unknown, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', `/v1/byo/sources/${enc(sourceId)}/retire`, { idempotent: true })
      printResult(s, data, () => fields(data))
    })
}
