import type { Command } from 'commander'
import { enc, gatewayCall, queryOf } from '../gateway-call.js'
import { isoTime, positiveInt } from '../option-parsers.js'
import { fields, printResult, table } from '../output.js'
import { settingsOf } from '../settings.js'

const COLUMNS = ['rental_id', 'renter_id', 'source_id', 'state', 'starts_at', 'expires_at']

/** `sgw rental create|end|list`: rentals (create and end with the admin token; list with the admin's or a renter's). */
export function registerRental(program: Command): void {
  const rental = program.command('rental').description('rentals of sources to renters')
  rental
    .command('create')
    .description('rent a source to a renter (admin token)')
    .requiredOption('--renter-id <id>', 'the subject of the renter token')
    .requiredOption('--source-id <id>', 'a live source')
    .option('--starts-at <time>', 'ISO 8601 UTC; now when absent', isoTime)
    .option('--expires-at <time>', 'ISO 8601 UTC; until ended when absent', isoTime)
    .action(async (o: { renterId: string; sourceId: string; startsAt?: string; expiresAt?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const body = { renter_id: o.renterId, source_id: o.sourceId, ...(o.startsAt && { starts_at: o.startsAt }), ...(o.expiresAt && { expires_at: o.expiresAt }) }
      const { data } = await gatewayCall(s, 'POST', '/v1/admin/rentals', { body })
      printResult(s, data, () => fields(data))
    })
  rental
    .command('end')
    .description('end a rental now (admin token)')
    .argument('<rental_id>')
    .action(async (rentalId: string, _o: unknown, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', `/v1/admin/rentals/${enc(rentalId)}/end`, { idempotent: true })
      printResult(s, data, () => fields(data))
    })
  rental
    .command('list')
    .description('rentals, oldest first: every one (admin token) or your own (renter token)')
    .option('--renter-id <id>')
    .option('--source-id <id>')
    .option('--state <state>', 'scheduled, active, ended or expired')
    .option('--limit <n>', 'per page (1 to 200)', positiveInt)
    .option('--cursor <cursor>', 'the next page, from the previous one')
    .action(async (o: { renterId?: string; sourceId?: string; state?: string; limit?: number; cursor?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      const page = await gatewayCall(s, 'GET', `/v1/rentals${queryOf({ renter_id: o.renterId, source_id: o.sourceId, state: o.state, limit: o.limit, cursor: o.cursor })}`)
      printResult(s, { data: page.data, next_cursor: page.next_cursor }, () => table(page.data, COLUMNS, page.next_cursor))
    })
}
