import type { Command } from 'commander'
import { enc, gatewayCall } from '../gateway-call.js'
import { fields, printResult } from '../output.js'
import { settingsOf } from '../settings.js'

/** `sgw token create|revoke`: API tokens, with the operator's admin token. */
export function registerToken(program: Command): void {
  const token = program.command('token').description('issue and revoke API tokens (admin token)')
  token
    .command('create')
    .description('issue a token for a subject; the token is shown once')
    .requiredOption('--role <role>', 'creator, renter, metrics or scorer')
    .requiredOption('--subject <id>', 'the creator_id, renter_id or service name the token acts as')
    .action(async (o: { role: string; subject: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', '/v1/admin/tokens', { body: { role: o.role, subject: o.subject } })
      printResult(s, data, () => fields(data))
    })
  token
    .command('revoke')
    .description('revoke a token by its token_id; it stops working at once')
    .argument('<token_id>', 'tok_… as token create answered')
    .action(async (tokenId: string, _o: unknown, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', `/v1/admin/tokens/${enc(tokenId)}/revoke`, { idempotent: true })
      printResult(s, data, () => fields(data))
    })
}
