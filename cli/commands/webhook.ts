import type { Command } from 'commander'
import { usageError } from '../exit-codes.js'
import { enc, gatewayCall } from '../gateway-call.js'
import { isoTime } from '../option-parsers.js'
import { fields, printResult, table } from '../output.js'
import { settingsOf } from '../settings.js'

/** `sgw webhook retry|resend|deliveries`: steering a rental's webhook (renter token). */
export function registerWebhook(program: Command): void {
  const webhook = program.command('webhook').description("a rental's webhook deliveries (renter token)")
  webhook
    .command('retry')
    .description('try the event the webhook waits on now, instead of at the end of its backoff')
    .argument('<rental_id>')
    .action(async (rentalId: string, _o: unknown, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'POST', `/v1/rentals/${enc(rentalId)}/webhook/retry`, { idempotent: true })
      printResult(s, data, () => fields(data))
    })
  webhook
    .command('resend')
    .description('queue events again: one (--event-id) or every one since a time (--since)')
    .argument('<rental_id>')
    .option('--event-id <id>', 'one event, such as a dead letter')
    .option('--since <time>', 'every event of the rental accepted at or after this ISO 8601 UTC time', isoTime)
    .action(async (rentalId: string, o: { eventId?: string; since?: string }, cmd: Command) => {
      const s = settingsOf(cmd)
      if ((o.eventId === undefined) === (o.since === undefined)) throw usageError('give one of --event-id <id> or --since <time>')
      const { data } =
        o.eventId !== undefined
          ? await gatewayCall(s, 'POST', `/v1/rentals/${enc(rentalId)}/webhook/deliveries/${enc(o.eventId)}/resend`)
          : await gatewayCall(s, 'POST', `/v1/rentals/${enc(rentalId)}/webhook/resend`, { body: { since: o.since } })
      printResult(s, data, () => fields(data))
    })
  webhook
    .command('deliveries')
    .description('the last attempts and dead letters, newest first')
    .argument('<rental_id>')
    .action(async (rentalId: string, _o: unknown, cmd: Command) => {
      const s = settingsOf(cmd)
      const { data } = await gatewayCall(s, 'GET', `/v1/rentals/${enc(rentalId)}/webhook/deliveries`)
      printResult(s, data, () =>
        [
          'attempts:',
          table(data.attempts, ['attempted_at', 'event_id', 'attempt', 'result', 'status', 'error', 'next_attempt_at']),
          'dead letters:',
          table(data.dead_letters, ['dead_at', 'event_id', 'attempts', 'last_error']),
        ].join('\n'),
      )
    })
}
