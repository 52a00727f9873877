import type { RentalCursor } from '../rental-events.js'
import type { LoopContext } from './loop-context.js'
import type { LoopWrites } from './loop-writes.js'
import { retryDelayMs } from './retry-schedule.js'
import { eventIdOf, webhookIdOf } from './webhook-event.js'
import type { PendingDelivery, WebhookEndpoint } from './webhook-state.js'

/** What delivering one event uses of its loop. */
export interface DeliveringLoop {
  readonly c: LoopContext
  readonly w: LoopWrites
  readonly rentalId: string
  readonly stop: AbortSignal
  /** Writes the loop's run so far (loop-writes.ts). */
  flush(): Promise<void>
  /** Waits `ms`, or less: the loop stops, or something the wait depends on changed (the endpoint, the rental's filter). */
  pause(ms: number): Promise<void>
}

/** Whether a request to end the wait (retry, re-send, URL set again) came after the wait began. */
const retryAsked = (endpoint: WebhookEndpoint, pending: PendingDelivery) => (endpoint.retry_requests ?? 0) > (pending.retries_seen ?? 0)

/**
 * Tries one event of a rental, placed at `at` in its order, until it is delivered,
 * dead-lettered, skipped, or the loop stops: its endpoint was disabled or removed, the
 * process stops, or the rental's shard is no longer this process's (checked before each
 * attempt). `wanted` is asked before each attempt too: an event the renter's filter
 * leaves out now is skipped, even one already waiting for its retry. A request to retry
 * (the endpoint's retry_requests grew) ends the wait at once.
 * A success is written with the loop's run; a failure writes the run so far, the attempt
 * and the retry state (same webhook-id, same window) before the wait.
 */
export async function deliverEvent(
  loop: DeliveringLoop,
  at: RentalCursor,
  eventId: string,
  event: Record<string, unknown>,
  /** When the log stored the signal, for the delivery latency; undefined for re-sends and dispute events. */
  storedAtMs: number | undefined,
  /** Whether the rental still takes the event (its filter); always, when omitted. */
  wanted?: () => boolean,
): Promise<'delivered' | 'dead' | 'skipped' | 'stopped'> {
  const { c, w, rentalId, stop } = loop
  let pending: PendingDelivery = w.pendingOf(at, eventId) ?? { seq: at.seq, ...(eventId !== eventIdOf(at.seq) && { event_id: eventId }), first_attempt_at: c.now(), attempts: 0, next_at: 0 }
  const webhookId = webhookIdOf(rentalId, eventId)
  const body = JSON.stringify(event)
  for (;;) {
    let endpoint: WebhookEndpoint | undefined
    for (;;) {
      endpoint = c.endpoint(rentalId)
      if (stop.aborted || endpoint?.state !== 'enabled' || !c.owns(rentalId)) return 'stopped'
      if (wanted !== undefined && !wanted()) return 'skipped'
      const wait = retryAsked(endpoint, pending) ? 0 : pending.next_at - c.now()
      if (wait <= 0) break
      await loop.pause(wait)
    }
    const now = c.now()
    const outcome = await c.send(endpoint, webhookId, body, now)
    c.onAttempt(outcome.result)
    const attempts = pending.attempts + 1
    const base = { webhook_id: webhookId, event_id: eventId, attempt: attempts, attempted_at: new Date(now).toISOString(), result: outcome.result, status: outcome.status, error: outcome.error, duration_ms: outcome.durationMs }
    if (outcome.result === 'delivered') {
      w.attempt({ ...base, next_attempt_at: null })
      w.succeeded(now)
      if (storedAtMs !== undefined) c.onDelivered(c.now() - storedAtMs)
      return 'delivered'
    }
    const failingSince = endpoint.failing_since === null ? now : Date.parse(endpoint.failing_since)
    const disable = outcome.result === 'gone' ? 'gone' : now - failingSince >= c.disableAfterMs ? 'failing' : null
    if (disable !== null) {
      w.attempt({ ...base, next_attempt_at: null })
      await w.setPending({ ...pending, attempts }, at)
      await loop.flush()
      await c.markEndpoint(rentalId, (e) => ({ ...e, state: 'disabled', disabled_reason: disable, disabled_at: base.attempted_at, failing_since: e.failing_since ?? base.attempted_at }))
      return 'stopped'
    }
    if (endpoint.failing_since === null) await c.markEndpoint(rentalId, (e) => ({ ...e, failing_since: e.failing_since ?? base.attempted_at }))
    if (now - pending.first_attempt_at >= c.retryWindowMs) {
      w.attempt({ ...base, next_attempt_at: null })
      await c.state.addDeadLetter(rentalId, { webhook_id: webhookId, event_id: eventId, seq: at.seq, dead_at: base.attempted_at, attempts, last_error: outcome.error })
      c.onDeadLetter()
      return 'dead'
    }
    // Counted from the failed attempt's end: a 10 s timeout must not eat the first 5 s delay.
    const nextAt = c.now() + retryDelayMs(attempts, c.retryDelaysMs, outcome.retryAfterMs)
    w.attempt({ ...base, next_attempt_at: new Date(nextAt).toISOString() })
    pending = { ...pending, attempts, next_at: nextAt, retries_seen: endpoint.retry_requests ?? 0 }
    // Before the wait: the run so far, this attempt and the retry state, so a restart resumes the retries.
    await w.setPending(pending, at)
    await loop.flush()
  }
}
