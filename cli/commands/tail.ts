import type { Command } from 'commander'
import { positiveInt } from '../option-parsers.js'
import { eventLine, forEachEvent } from '../renter-stream.js'
import { settingsOf } from '../settings.js'

/** `sgw tail`: a rental's event stream on stdout, resumed after every break. */
export function registerTail(program: Command): void {
  program
    .command('tail')
    .description("print a rental's events as they come (renter token): the event stream, resumed automatically; ends with the rental")
    .argument('<rental_id>')
    .option('--last-event-id <id>', 'start right after this event; from the rental\'s start when absent')
    .option('--max-events <n>', 'stop after this many events', positiveInt)
    .action(async (rentalId: string, o: { lastEventId?: string; maxEvents?: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      await forEachEvent(s, rentalId, o, async (event) => {
        process.stdout.write(`${s.json ? JSON.stringify(event) : eventLine(event)}\n`)
      })
    })
}
