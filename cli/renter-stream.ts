import { GatewaySdkError, RenterApiError, RenterClient, type RentalEvent } from '@signal-ingest-gateway/sdk'
import { CliError, EXIT } from './exit-codes.js'
import { note } from './output.js'
import { tokenOf, type Settings } from './settings.js'

/** Connections in a row that may fail (no answer, 429, 5xx) before the command gives up with exit 3. */
const MAX_FAILURES = 5

/**
 * A rental's events through the SDK's resumed stream (a new stream ticket for every
 * connection, `Last-Event-ID` after a break), until `byo.rental.ended`, `maxEvents`, or
 * Ctrl-C. The SDK's errors become exit codes: a refusal 1, a stream that cannot be read 3.
 */
export async function forEachEvent(s: Settings, rentalId: string, options: { lastEventId?: string; maxEvents?: number }, each: (event: RentalEvent) => Promise<void>): Promise<void> {
  const renter = new RenterClient({ gatewayUrl: s.url, token: tokenOf(s) })
  const stop = new AbortController()
  const onSignal = () => stop.abort()
  process.once('SIGINT', onSignal)
  let seen = 0
  try {
    for await (const event of renter.events(rentalId, {
      ...(options.lastEventId === undefined ? {} : { lastEventId: options.lastEventId }),
      signal: stop.signal,
      maxFailures: MAX_FAILURES,
      onReconnect: (r) => note(`stream interrupted (${r.reason}); resuming after ${r.lastEventId ?? 'the start'} in ${(r.delayMs / 1000).toFixed(1)} s`),
    })) {
      await each(event)
      if (options.maxEvents !== undefined && ++seen >= options.maxEvents) break
    }
  } catch (err) {
    if (err instanceof RenterApiError) throw new CliError(err.status === 429 || err.status >= 500 ? EXIT.unreachable : EXIT.refused, err.message)
    if (err instanceof GatewaySdkError) throw new CliError(EXIT.unreachable, err.message)
    throw err
  } finally {
    process.off('SIGINT', onSignal)
  }
}

/** One line for people: the id, the kind and what matters of it. */
export function eventLine(e: RentalEvent): string {
  const rest = ['signal_id', 'severity', 'token', 'dispute_id', 'state', 'from_event_id', 'to_event_id'].filter((k) => e[k] !== undefined).map((k) => `${k}=${String(e[k])}`)
  return [e.event_id, e.event, ...rest].join('  ')
}
