import type { LogRecord } from '../pipeline/index.js'
import type { DisputeGate, DisputeRecord } from '../registry/index.js'
import { isActive, type RentalRecord } from '../rentals/index.js'
import type { DeliveryEvent, SignalDisputedEvent } from '../schemas/index.js'
import { disputedEventId, signalEventId, type EventPosition } from './event-id.js'
import { rentalEventOf } from './signal-event.js'

/**
 * The one order of a rental's events, which every channel (stream replay, live stream,
 * polling, webhooks) follows, so that they cannot disagree: the log's records in seq
 * order, and each accepted dispute's events placed after the record `after_seq` it was
 * accepted after, before the next record; disputes placed after the same record in the
 * order they were accepted (`accept_order`), one event per named signal by seq. Since
 * this release `after_seq` is the dispute's own placement record in the log
 * (pipeline/dispute-placement.ts), at which every channel waits until the dispute is
 * settled; a dispute recorded by an earlier release names a signal's record instead,
 * and is placed after it the same way.
 */

/** What the order needs of the registry: its accepted disputes in delivery order, and when a channel may pass a dispute placement. */
export interface RentalDisputes {
  acceptedDisputesOf(sourceId: string): readonly DisputeRecord[]
  readonly disputeGate: DisputeGate
  /** Told of each recorded change of disputes; returns how to stop. */
  watchDisputes(listener: (changed: readonly DisputeRecord[]) => void): () => void
}

/** A point in a rental's events: after log record `seq`, and after the dispute events placed there up to `dispute` when set. */
export interface RentalCursor {
  readonly seq: number
  readonly dispute?: { readonly order: number; readonly signalSeq: number }
}

/** An event with the point just after it. */
export interface PlacedEvent {
  readonly event: DeliveryEvent
  readonly cursor: RentalCursor
}

/** Negative when cursor `a` is before `b`. */
export function compareCursors(a: RentalCursor, b: RentalCursor): number {
  if (a.seq !== b.seq) return a.seq - b.seq
  if (a.dispute === undefined || b.dispute === undefined) return a.dispute === undefined ? (b.dispute === undefined ? 0 : -1) : 1
  return a.dispute.order - b.dispute.order || a.dispute.signalSeq - b.dispute.signalSeq
}

/** The event id that resumes from `cursor`. */
export function cursorEventId(cursor: RentalCursor): string {
  return cursor.dispute === undefined ? signalEventId(cursor.seq) : disputedEventId(cursor.seq, cursor.dispute.signalSeq)
}

/**
 * The cursor an event id names for a rental's source. A dispute event's id names after_seq
 * and the signal, which one accepted dispute at most names (a signal cannot be named by
 * two), whose accept_order places it; an id naming none (never sent) resumes after the record.
 */
export function cursorOf(position: EventPosition, disputes: RentalDisputes, sourceId: string): RentalCursor {
  if (position.disputedSeq === undefined) return { seq: position.seq }
  for (const d of disputes.acceptedDisputesOf(sourceId)) {
    if (d.after_seq !== position.seq) continue
    if (d.signals.some((s) => s.seq === position.disputedSeq)) return { seq: position.seq, dispute: { order: d.accept_order ?? 0, signalSeq: position.disputedSeq } }
  }
  return { seq: position.seq }
}

/** The rental's event of a log record, with its cursor; undefined event when the record is not the rental's. */
export function recordStep(record: LogRecord, rental: RentalRecord): { event: DeliveryEvent | undefined; cursor: RentalCursor } {
  return { event: rentalEventOf(record, rental), cursor: { seq: record.seq } }
}

/**
 * The rental's dispute events placed after `after` and at most after record `throughSeq`,
 * in order. A rental receives a dispute's event for each named signal it received (its
 * source, received while it was active), when the dispute was accepted while it was
 * active: an ended rental receives nothing more.
 */
export function disputeEventsOf(disputes: RentalDisputes, rental: RentalRecord, after: RentalCursor, throughSeq: number): PlacedEvent[] {
  const out: PlacedEvent[] = []
  for (const d of disputes.acceptedDisputesOf(rental.source_id)) {
    const at = d.after_seq ?? 0
    if (at < after.seq) continue
    if (at > throughSeq) break
    const acceptedAt = Date.parse(d.resolved_at ?? '')
    if (Number.isNaN(acceptedAt) || !isActive(rental, acceptedAt)) continue
    const order = d.accept_order ?? 0
    const signals = [...d.signals].sort((a, b) => a.seq - b.seq)
    for (const signal of signals) {
      const cursor: RentalCursor = { seq: at, dispute: { order, signalSeq: signal.seq } }
      if (compareCursors(cursor, after) <= 0) continue
      if (!isActive(rental, Date.parse(signal.received_at))) continue
      out.push({ cursor, event: disputedEvent(d, signal.signal_id, signal.seq, rental.rental_id, at) })
    }
  }
  return out
}

function disputedEvent(d: DisputeRecord, signalId: string, signalSeq: number, rentalId: string, afterSeq: number): SignalDisputedEvent {
  return {
    event: 'byo.signal.disputed',
    event_id: disputedEventId(afterSeq, signalSeq),
    rental_id: rentalId,
    source_id: d.source_id,
    signal_id: signalId,
    signal_event_id: signalEventId(signalSeq),
    dispute_id: d.dispute_id,
    disputed_at: d.resolved_at ?? '',
  }
}

/**
 * The dispute events due, taken one at a time as the log's records go by: `before(seq)`
 * those placed before record `seq` (the caller sends them, then the record's event),
 * `through(seq)` those placed up to after record `seq`.
 */
export class DisputeQueue {
  readonly #events: PlacedEvent[]
  #next = 0

  constructor(disputes: RentalDisputes, rental: RentalRecord, after: RentalCursor, throughSeq: number) {
    this.#events = disputeEventsOf(disputes, rental, after, throughSeq)
  }

  before(seq: number): PlacedEvent | undefined {
    return this.through(seq - 1)
  }

  through(seq: number): PlacedEvent | undefined {
    const e = this.#events[this.#next]
    if (e === undefined || e.cursor.seq > seq) return undefined
    this.#next++
    return e
  }

  /** Whether an event placed up to after record `seq` is still due. */
  has(seq: number): boolean {
    const e = this.#events[this.#next]
    return e !== undefined && e.cursor.seq <= seq
  }
}

