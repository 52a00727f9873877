import { compareCursors, type RentalCursor } from '../rental-events.js'
import type { LoopContext } from './loop-context.js'
import type { DeliveryAttempt, PendingDelivery } from './webhook-state.js'

/** While deliveries succeed, the endpoint's `last_success_at` is written at most this often. */
export const SUCCESS_WRITE_EVERY_MS = 60_000

/**
 * What one rental's loop writes to the state per run of events instead of per event, once
 * RUN_MAX_EVENTS were delivered, RUN_MAX_MS passed, the queue ran dry, an attempt failed,
 * or the loop stops (its shard was lost, its endpoint removed, the process stops): the
 * position (a point in the rental's order, records and dispute events), the attempts made
 * since the last write, a cleared retry state, and the endpoint's last success. `flush`
 * issues them together so the store can commit them as one group. The retry state of an
 * event being retried (`pending`) is written at once, before the loop waits.
 */
export class LoopWrites {
  readonly #rentalId: string
  readonly #c: LoopContext
  /** The position stored. */
  stored: RentalCursor = { seq: 0 }
  /** The retry state of the event being retried (or of the last one that was), and its place. */
  pending: PendingDelivery | null = null
  pendingAt: RentalCursor = { seq: 0 }
  /** Whether the store holds a retry state, which a flush past its event clears. */
  pendingStored = false
  #attempts: DeliveryAttempt[] = []
  /** Attempts of a flush whose write is under way. */
  #flushing: readonly DeliveryAttempt[] = []
  #lastSuccessAt: number | null = null

  constructor(rentalId: string, context: LoopContext) {
    this.#rentalId = rentalId
    this.#c = context
  }

  /** Attempts made and not yet written (oldest first): the deliveries list shows them at once. */
  unwritten(): DeliveryAttempt[] {
    return [...this.#flushing, ...this.#attempts]
  }

  attempt(attempt: DeliveryAttempt): void {
    this.#attempts.push(attempt)
  }

  succeeded(at: number): void {
    this.#lastSuccessAt = at
  }

  /** The retry state kept for the event at `at` with this id, if it is the one kept. */
  pendingOf(at: RentalCursor, eventId: string): PendingDelivery | undefined {
    const p = this.pending
    return p !== null && p.seq === at.seq && (p.event_id ?? String(p.seq)) === eventId ? p : undefined
  }

  async setPending(pending: PendingDelivery, at: RentalCursor): Promise<void> {
    this.pending = pending
    this.pendingAt = at
    await this.#c.state.setPending(this.#rentalId, pending)
    this.pendingStored = true
  }

  #clearsPending(cursor: RentalCursor): boolean {
    return this.pendingStored && (this.pending === null || compareCursors(this.pendingAt, cursor) <= 0)
  }

  /** Whether a flush at `cursor` would write anything. */
  dirty(cursor: RentalCursor): boolean {
    return this.#attempts.length > 0 || compareCursors(cursor, this.stored) > 0 || this.#lastSuccessAt !== null || this.#clearsPending(cursor)
  }

  /** Writes what the run did up to `cursor`: its attempts, the position, a cleared retry state, the endpoint's success. */
  async flush(cursor: RentalCursor): Promise<void> {
    const { state } = this.#c
    const rentalId = this.#rentalId
    const attempts = this.#attempts
    this.#attempts = []
    this.#flushing = attempts
    const writes: Promise<void>[] = [state.addAttempts(rentalId, attempts).finally(() => void (this.#flushing = []))]
    if (compareCursors(cursor, this.stored) > 0) {
      writes.push(state.advancePosition(rentalId, cursor).then(() => void (this.stored = compareCursors(cursor, this.stored) > 0 ? cursor : this.stored)))
    }
    if (this.#clearsPending(cursor)) {
      writes.push(state.setPending(rentalId, null).then(() => void (this.pendingStored = false)))
      this.pending = null
    }
    const succeeded = this.#lastSuccessAt
    const endpoint = this.#c.endpoint(rentalId)
    if (succeeded !== null && endpoint !== undefined) {
      const last = endpoint.last_success_at === null ? null : Date.parse(endpoint.last_success_at)
      if (endpoint.failing_since !== null || last === null || succeeded - last >= SUCCESS_WRITE_EVERY_MS) {
        const at = new Date(succeeded).toISOString()
        writes.push(this.#c.markEndpoint(rentalId, (e) => ({ ...e, last_success_at: at, failing_since: null })))
      }
    }
    this.#lastSuccessAt = null
    // Issued together, so the store can commit them as one group.
    const results = await Promise.allSettled(writes)
    const failed = results.find((r) => r.status === 'rejected')
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason
  }
}

/**
 * Where a rental's loop starts: after its stored position, never before the endpoint's
 * start (a position left by an endpoint removed meanwhile on another process is older).
 * Releases that kept the position in a log consumer of their own (`webhook-<rental_id>`)
 * and the last dispute event delivered in a key of its own resume from there: both are
 * folded into the position and removed.
 */
export async function resumePoint(c: LoopContext, rentalId: string, startSeq: number): Promise<{ cursor: RentalCursor; stored: RentalCursor }> {
  const { state, log } = c
  const stored = await state.position(rentalId)
  const legacy = stored === null ? await log.consumerInfo(`webhook-${rentalId}`) : null
  const legacyDisputed = stored === null ? await state.legacyDisputeCursor(rentalId) : null
  const starts: RentalCursor[] = [stored ?? { seq: 0 }, { seq: startSeq - 1 }, { seq: legacy?.ackSeq ?? 0 }, legacyDisputed ?? { seq: 0 }]
  const cursor = starts.reduce((a, b) => (compareCursors(a, b) >= 0 ? a : b))
  if (legacy === null && legacyDisputed === null) return { cursor, stored: stored ?? { seq: 0 } }
  await state.advancePosition(rentalId, cursor)
  if (legacy !== null) await log.deleteConsumer(legacy.name).catch(() => false)
  await state.deleteLegacyDisputeCursor(rentalId)
  return { cursor, stored: cursor }
}
