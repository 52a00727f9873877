import type { LogRecord, LostRange, SignalLog } from '../pipeline/index.js'
import { isFinal, type RentalRecord } from '../rentals/index.js'
import type { DeliveryEvent, StreamGapEvent } from '../schemas/index.js'
import { signalEventId } from './event-id.js'
import type { LiveTail } from './live-tail.js'
import { scanRentalEvents } from './log-scan.js'
import { sharedRentalEvent } from './shared-events.js'
import { rentalEndedEvent } from './signal-event.js'

/** Where a stream's events go: an SSE response. `send` returns false once the stream is to stop (the reader is too slow, or gone). */
export interface EventSink {
  send(event: DeliveryEvent): boolean
  /** Resolves once the transport has taken what was sent (backpressure during replay). */
  writable(): Promise<void>
  /** Ends the stream after what was sent. */
  end(): void
  readonly closed: boolean
}

/** Events replayed per scan, and log records read per scan, so one replay step holds a bounded batch. */
const REPLAY_EVENTS = 256
const REPLAY_SCAN = 8192

type Pending = { kind: 'records'; records: readonly LogRecord[] } | { kind: 'lost'; range: LostRange } | { kind: 'disputed'; make: (afterSeq: number) => DeliveryEvent } | { kind: 'end' }

/**
 * One open stream of one rental: replays the log from its resume point up to the tail's
 * position, holding what the tail hands it meanwhile, then goes live. `cursor` is the
 * log position everything up to which has been dealt with, so every event goes out once
 * and in log order.
 */
export class StreamSession {
  readonly rentalId: string
  readonly sourceId: string
  #cursor: number
  #live = false
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
    private readonly afterSeq: number | undefined,
  ) {
    this.rentalId = rental.rental_id
    this.sourceId = rental.source_id
    this.#rental = () => rentalNow(this.rentalId)
    this.#cursor = afterSeq ?? 0
  }

  /** Replays, then goes live; resolves once live (or the stream stopped). */
  async start(): Promise<void> {
    this.#unlisten = this.tail.listen(this.sourceId, {
      records: (records) => this.#take({ kind: 'records', records }),
      lost: (range) => this.#take({ kind: 'lost', range }),
    })
    const upTo = this.tail.position
    let start: { afterSeq?: number } = this.afterSeq === undefined ? {} : { afterSeq: this.afterSeq }
    for (;;) {
      if (this.sink.closed) return this.stop()
      const step = await scanRentalEvents(this.log, this.#rental, start, upTo, REPLAY_EVENTS, REPLAY_SCAN)
      if (step.lost !== null) this.#gap(step.lost)
      for (const event of step.events) if (!this.#send(event)) return this.stop()
      this.#cursor = Math.max(this.#cursor, step.scannedTo)
      if (step.complete) break
      start = { afterSeq: step.scannedTo }
      await this.sink.writable()
    }
    this.#cursor = Math.max(this.#cursor, upTo)
    this.#live = true
    for (const p of this.#pending.splice(0)) this.#apply(p)
  }

  /** The rental ended or expired: `settledSeq` is the log position past which no signal of its span can be. */
  endAfter(settledSeq: number): void {
    if (this.#ending) return
    this.#ending = true
    void this.tail.reached(settledSeq).then(() => this.#take({ kind: 'end' }))
  }

  /** An accepted dispute names a signal this rental received; `make` builds the event for the position it follows. */
  disputed(make: (afterSeq: number) => DeliveryEvent): void {
    this.#take({ kind: 'disputed', make })
  }

  stop(): void {
    this.#unlisten?.()
    this.#unlisten = undefined
    this.#pending.length = 0
  }

  get cursor(): number {
    return this.#cursor
  }

  #take(p: Pending): void {
    if (this.sink.closed) return this.stop()
    if (!this.#live) this.#pending.push(p)
    else this.#apply(p)
  }

  #apply(p: Pending): void {
    if (this.#unlisten === undefined) return
    if (p.kind === 'records') {
      const rental = this.#rental()
      if (rental === undefined) return this.#close()
      for (const r of p.records) {
        if (r.seq <= this.#cursor) continue
        // Made once per record and rental: the rental's other streams get the same object.
        const event = sharedRentalEvent(r, rental)
        this.#cursor = r.seq
        if (event !== undefined && !this.#send(event)) return this.stop()
      }
    } else if (p.kind === 'lost') {
      if (p.range.toSeq > this.#cursor) this.#gap({ ...p.range, fromSeq: Math.max(p.range.fromSeq, this.#cursor + 1) })
    } else if (p.kind === 'disputed') {
      if (!this.#send(p.make(this.#cursor))) this.stop()
    } else {
      const rental = this.#rental()
      if (rental !== undefined && isFinal(rental)) this.#send(rentalEndedEvent(rental, Math.max(this.#cursor, this.tail.position)))
      this.#close()
    }
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
    this.#cursor = Math.max(this.#cursor, range.toSeq)
    this.#send(event)
  }

  #send(event: DeliveryEvent): boolean {
    return this.sink.send(event)
  }

  #close(): void {
    this.stop()
    this.sink.end()
  }
}
