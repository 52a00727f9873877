import { placementIn, type LogRecord, type LostRange, type PlacementMark, type SignalLog } from '../pipeline/index.js'
import { isFinal, type RentalRecord } from '../rentals/index.js'
import type { DeliveryEvent, StreamGapEvent } from '../schemas/index.js'
import { signalEventId } from './event-id.js'
import type { LiveTail } from './live-tail.js'
import { scanRentalEvents } from './log-scan.js'
import { lastEventSeq } from './rental-end.js'
import { compareCursors, DisputeQueue, type RentalCursor, type RentalDisputes } from './rental-events.js'
import { sharedRentalEvent } from './shared-events.js'
import { rentalEndedEvent } from './signal-event.js'

/**
 * Why the server closed a stream, as `sgw_stream_disconnects_total` counts it. A client
 * that goes away is not counted: only what the server decides. A stream over the
 * per-rental cap is refused with 429 before it opens, so the cap never closes one.
 * - slow_reader: more than STREAM_BUFFER_BYTES waited for the reader.
 * - stalled_reader: the reader took nothing for STREAM_STALL_TIMEOUT_MS while data waited.
 * - token_revoked: the token that opened it (itself or through a ticket) was revoked.
 * - rental_ended: after byo.rental.ended, or the rental no longer exists.
 * - shutdown: the process is stopping (SIGTERM).
 * - error: reading the log for it failed; the client resumes from its last event id.
 * - place_lost: on a cluster, the process could not renew its streams' places in the
 *   shared store before they expired, so other processes may give them out; the client
 *   resumes, on a place counted again.
 */
export const STREAM_DISCONNECT_REASONS = ['slow_reader', 'stalled_reader', 'token_revoked', 'rental_ended', 'shutdown', 'error', 'place_lost'] as const
export type StreamDisconnectReason = (typeof STREAM_DISCONNECT_REASONS)[number]

/** Where a stream's events go: an SSE response. `send` returns false once the stream is to stop (the reader is too slow, or gone). */
export interface EventSink {
  send(event: DeliveryEvent): boolean
  /** Resolves once the transport has taken what was sent (backpressure during replay). */
  writable(): Promise<void>
  /** A notice that is not one of the rental's events (no event id: resume points never move for it). */
  notice?(notice: { readonly event: string }): void
  /** Ends the stream after what was sent; `reason` is what /metrics counts it under. */
  end(reason: StreamDisconnectReason): void
  readonly closed: boolean
}

/** Where delivery latencies go (a histogram of /metrics): milliseconds from the log storing a signal to its event going out. */
export interface LatencyObserver {
  observeMs(ms: number): void
}

/** Events replayed per scan, and log records read per scan, so one replay step holds a bounded batch. */
const REPLAY_EVENTS = 256
const REPLAY_SCAN = 8192

type Pending = { kind: 'records'; records: readonly LogRecord[] } | { kind: 'lost'; range: LostRange } | { kind: 'end' }

/**
 * One open stream of one rental: replays the log from its resume point up to the tail's
 * position, holding what the tail hands it meanwhile, then goes live. `cursor` is the
 * point in the rental's one order (rental-events.ts) everything up to which has been
 * dealt with, so every event, accepted disputes' included, goes out once and in order.
 * Records after a dispute placement wait until its dispute is recorded (the registry's gate).
 */
export class StreamSession {
  readonly rentalId: string
  readonly sourceId: string
  #cursor: RentalCursor
  #live = false
  /** Live, but records wait at a dispute placement: what comes meanwhile is held. */
  #blocked = false
  #ending = false
  readonly #pending: Pending[] = []
  #unlisten: (() => void) | undefined
  readonly #rental: () => RentalRecord | undefined

  constructor(
    rental: RentalRecord,
    private readonly log: SignalLog,
    private readonly tail: LiveTail,
    rentalNow: (id: string) => RentalRecord | undefined,
    private readonly sink: EventSink,
    private readonly start_: RentalCursor | undefined,
    private readonly disputes: RentalDisputes,
    private readonly latency?: LatencyObserver,
  ) {
    this.rentalId = rental.rental_id
    this.sourceId = rental.source_id
    this.#rental = () => rentalNow(this.rentalId)
    this.#cursor = start_ ?? { seq: 0 }
  }

  /** Replays, then goes live; resolves once live (or the stream stopped). */
  async start(): Promise<void> {
    this.#unlisten = this.tail.listen(this.sourceId, {
      records: (records) => this.#take({ kind: 'records', records }),
      lost: (range) => this.#take({ kind: 'lost', range }),
    })
    const upTo = this.tail.position
    let start: RentalCursor | undefined = this.start_
    for (;;) {
      if (this.sink.closed) return this.stop()
      const from = start === undefined ? {} : { afterSeq: start.seq, ...(start.dispute && { dispute: start.dispute }) }
      const step = await scanRentalEvents(this.log, this.#rental, from, upTo, REPLAY_EVENTS, REPLAY_SCAN, this.disputes)
      if (step.lost !== null) this.#gap(step.lost)
      for (const event of step.events) if (!this.#send(event)) return this.stop()
      this.#advance(step.cursor)
      if (step.complete) break
      start = step.cursor
      // Stopped before a dispute placement whose dispute is not recorded yet: the replay resumes there once it is settled.
      if (step.waitingFor !== undefined) await this.disputes.disputeGate.until(step.waitingFor)
      await this.sink.writable()
    }
    this.#advance({ seq: upTo })
    this.#live = true
    this.#drain()
  }

  /** An accepted dispute of this rental's source was recorded, placed after record `afterSeq`: its events go once the stream is past that record. */
  disputesChanged(afterSeq: number): void {
    void this.tail.reached(afterSeq).then(() => this.#flushDisputes())
  }

  /** The rental ended or expired: `settledSeq` is the log position past which no signal of its span can be. */
  endAfter(settledSeq: number): void {
    if (this.#ending) return
    this.#ending = true
    void this.tail.reached(settledSeq).then(() => this.#take({ kind: 'end' }))
  }

  /** Tells the reader something about its rental that is not one of its events (its webhook's health), once it is live; a replaying stream is not told. */
  notice(notice: { readonly event: string }): void {
    if (this.#live && this.#unlisten !== undefined && !this.sink.closed) this.sink.notice?.(notice)
  }

  stop(): void {
    this.#unlisten?.()
    this.#unlisten = undefined
    this.#pending.length = 0
  }

  get cursor(): number {
    return this.#cursor.seq
  }

  #take(p: Pending): void {
    if (this.sink.closed) return this.stop()
    if (!this.#live || this.#blocked) this.#pending.push(p)
    else this.#apply(p)
  }

  /** Applies what was held, until a record must wait at a dispute placement; then the disputes due. */
  #drain(): void {
    while (this.#pending.length > 0 && !this.#blocked) this.#apply(this.#pending.shift() as Pending)
    if (!this.#blocked) this.#flushDisputes()
  }

  #apply(p: Pending): void {
    if (this.#unlisten === undefined) return
    if (p.kind === 'records') {
      const rental = this.#rental()
      if (rental === undefined) return this.#close()
      for (let i = 0; i < p.records.length; i++) {
        const r = p.records[i] as LogRecord
        if (r.seq <= this.#cursor.seq) continue
        // A dispute placement: nothing goes past it until its dispute is recorded (its events then go before the next record).
        const mark = placementIn(r)
        if (mark !== undefined && !this.disputes.disputeGate.settled(mark)) return this.#block({ kind: 'records', records: p.records.slice(i) }, mark)
        // The disputes placed before this record go first.
        const due = new DisputeQueue(this.disputes, rental, this.#cursor, r.seq - 1)
        for (let d = due.through(r.seq - 1); d !== undefined; d = due.through(r.seq - 1)) if (!this.#sendAt(d.event, d.cursor)) return this.stop()
        // Made once per record and rental: the rental's other streams get the same object.
        const event = sharedRentalEvent(r, rental)
        this.#cursor = { seq: r.seq }
        if (event === undefined) continue
        if (!this.#send(event)) return this.stop()
        // Live events only: a replay's age is the reader's absence, not the delivery's speed.
        this.latency?.observeMs(Date.now() - r.time)
      }
    } else if (p.kind === 'lost') {
      if (p.range.toSeq > this.#cursor.seq) this.#gap({ ...p.range, fromSeq: Math.max(p.range.fromSeq, this.#cursor.seq + 1) })
    } else {
      this.#flushDisputes()
      const rental = this.#rental()
      if (rental === undefined || !isFinal(rental)) return this.#close()
      // Nothing more is taken; the end's id names the rental's last event, the same on every channel.
      this.stop()
      const through = Math.max(this.#cursor.seq, this.tail.position)
      void lastEventSeq(this.log, rental, this.disputes, through).then(
        (seq) => {
          this.#send(rentalEndedEvent(rental, seq))
          this.#close()
        },
        // The log could not be read: the stream closes without its end; the client resumes and gets it then.
        () => this.#close(),
      )
    }
  }

  /** Holds `rest` (and what comes after) until the placement `mark` at its head is settled. */
  #block(rest: Pending, mark: PlacementMark): void {
    this.#blocked = true
    this.#pending.unshift(rest)
    void this.disputes.disputeGate.until(mark).then(() => {
      this.#blocked = false
      if (this.#unlisten !== undefined && !this.sink.closed) this.#drain()
    })
  }

  /** Sends the dispute events placed up to the tail's position (every record to there was dealt with) that are still due. */
  #flushDisputes(): void {
    if (!this.#live || this.#blocked || this.#pending.length > 0 || this.#unlisten === undefined) return
    const rental = this.#rental()
    if (rental === undefined) return
    const through = Math.max(this.#cursor.seq, this.tail.position)
    const due = new DisputeQueue(this.disputes, rental, this.#cursor, through)
    for (let d = due.through(through); d !== undefined; d = due.through(through)) if (!this.#sendAt(d.event, d.cursor)) return this.stop()
  }

  #advance(to: RentalCursor): void {
    if (compareCursors(to, this.#cursor) > 0) this.#cursor = to
  }

  #sendAt(event: DeliveryEvent, cursor: RentalCursor): boolean {
    this.#advance(cursor)
    return this.#send(event)
  }

  #gap(range: { fromSeq: number; toSeq: number; count: number }): void {
    const event: StreamGapEvent = {
      event: 'byo.stream.gap',
      event_id: signalEventId(range.toSeq),
      rental_id: this.rentalId,
      from_event_id: signalEventId(range.fromSeq - 1),
      to_event_id: signalEventId(range.toSeq),
      count: range.toSeq - range.fromSeq + 1,
    }
    this.#advance({ seq: range.toSeq })
    this.#send(event)
  }

  #send(event: DeliveryEvent): boolean {
    return this.sink.send(event)
  }

  #close(): void {
    this.stop()
    this.sink.end('rental_ended')
  }
}
