import type { Command } from 'commander'
import { newWebhookSecret, signWebhookV1, type RentalEvent } from '@signal-ingest-gateway/sdk'
import { usageError } from '../exit-codes.js'
import { positiveInt } from '../option-parsers.js'
import { note } from '../output.js'
import { forEachEvent } from '../renter-stream.js'
import { settingsOf } from '../settings.js'

/** The kinds a webhook delivers; the stream's others (a gap, the rental's end) are only shown. */
const DELIVERED = new Set(['byo.signal.accepted', 'byo.signal.disputed'])
/** As the gateway's own attempts: an answer within 10 s. */
const ATTEMPT_TIMEOUT_MS = 10_000

/**
 * `sgw listen`: a webhook receiver tested on this machine. The rental's events are read
 * from its event stream (this command connects out, so the gateway never has to reach a
 * private network) and each is POSTed to --forward-to with the headers a delivery carries
 * (`webhook-id`, `webhook-timestamp`, `webhook-signature`), signed `v1` (HMAC-SHA256) with
 * a `whsec_` secret printed at the start: the receiver verifies it as it would a delivery
 * of a webhook set with that scheme. Each event is sent once, and what the receiver
 * answered is printed; nothing is retried (send it again by resuming with --last-event-id).
 */
export function registerListen(program: Command): void {
  program
    .command('listen')
    .description("forward a rental's events to a local URL, signed as webhook deliveries (v1, with a whsec_ secret printed at the start)")
    .argument('<rental_id>')
    .requiredOption('--forward-to <url>', 'your receiver, such as http://localhost:8080/hooks')
    .option('--secret <whsec>', 'sign with this whsec_ secret rather than a new one')
    .option('--last-event-id <id>', 'start right after this event; from the rental\'s start when absent')
    .option('--max-events <n>', 'stop after this many events', positiveInt)
    .action(async (rentalId: string, o: { forwardTo: string; secret?: string; lastEventId?: string; maxEvents?: number }, cmd: Command) => {
      const s = settingsOf(cmd)
      let target: URL
      try {
        target = new URL(o.forwardTo)
      } catch {
        throw usageError(`--forward-to is not a URL: ${o.forwardTo}`)
      }
      if (o.secret !== undefined && !o.secret.startsWith('whsec_')) throw usageError('--secret must be a whsec_ secret')
      const secret = o.secret ?? newWebhookSecret()
      if (s.json) process.stdout.write(`${JSON.stringify({ secret, forward_to: target.href })}\n`)
      else note(`Ready. Your webhook signing secret is ${secret} (scheme v1). Forwarding ${rentalId} to ${target.href}; Ctrl-C to stop.`)
      await forEachEvent(s, rentalId, o, async (event) => {
        if (!DELIVERED.has(event.event)) {
          if (!s.json) note(`${event.event_id}  ${event.event}  (not a delivery; not forwarded)`)
          return
        }
        const result = await forward(target, rentalId, event, secret)
        process.stdout.write(s.json ? `${JSON.stringify(result)}\n` : `${result.event_id}  ${result.event}  -> ${result.status ?? result.error}  ${result.duration_ms} ms\n`)
      })
    })
}

async function forward(target: URL, rentalId: string, event: RentalEvent, secret: string) {
  const body = JSON.stringify(event)
  const id = `msg_${rentalId}_${event.event_id}`
  const timestamp = Math.floor(Date.now() / 1000)
  const started = performance.now()
  const base = { webhook_id: id, event_id: event.event_id, event: event.event }
  try {
    const res = await fetch(target, {
      method: 'POST',
      redirect: 'manual',
      signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
      headers: {
        'content-type': 'application/json',
        'user-agent': 'sgw-listen/1',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signWebhookV1(secret, id, timestamp, body),
      },
      body,
    })
    await res.arrayBuffer().catch(() => undefined)
    return { ...base, status: res.status, error: null, duration_ms: Math.round(performance.now() - started) }
  } catch (err) {
    const cause = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message
    return { ...base, status: null, error: cause, duration_ms: Math.round(performance.now() - started) }
  }
}
