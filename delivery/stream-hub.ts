import type { SignalLog } from '../pipeline/index.js'
import type { DisputeRecord, Registry } from '../registry/index.js'
import { isFinal, type RentalRecord, type Rentals } from '../rentals/index.js'
import type { EventPosition } from './event-id.js'
import type { LiveTail } from './live-tail.js'
import { cursorOf } from './rental-events.js'
import type { StreamPlace, StreamPlaces } from './stream-places.js'
import { STREAM_DISCONNECT_REASONS, StreamSession, type EventSink, type LatencyObserver, type StreamDisconnectReason } from './stream-session.js'

export interface StreamHubOptions {
  readonly log: SignalLog
  readonly tail: LiveTail
  readonly rentals: Rentals
  readonly registry: Registry
  /** The per-rental cap's places: in memory for one process, on the key-value port across a cluster's processes. */
  readonly places: StreamPlaces
  /**
   * How long after a rental's end its streams wait before `byo.rental.ended`: a signal
   * received just before the end is appended to the log a moment later (verification and
   * the durable append), and must still reach the rental first.
   */
  readonly endSettleMs: number
  readonly now?: () => number
  /** Told, per live signal event written to a stream, the milliseconds since the log stored the signal. */
  readonly latency?: LatencyObserver
}

/**
 * The open streams of this process: their places under the per-rental cap, the rentals' ends, word of
 * accepted disputes (each stream places their events itself), and the figures for /metrics.
 */
export class StreamHub {
  readonly #o: StreamHubOptions
  readonly #now: () => number
  readonly #byRental = new Map<string, Set<StreamSession>>()
  readonly #ending = new Set<string>()
  readonly #stops: (() => void)[] = []
  readonly #timers = new Set<NodeJS.Timeout>()
  #open = 0
  eventsSent = 0
  /** Streams the server closed since the start, by why. */
  readonly disconnects = new Map<StreamDisconnectReason, number>(STREAM_DISCONNECT_REASONS.map((r) => [r, 0]))

  constructor(o: StreamHubOptions) {
    this.#o = o
    this.#now = o.now ?? Date.now
    this.#stops.push(o.rentals.onChange((r) => this.#changed(r)))
    this.#stops.push(o.registry.watchDisputes((changed) => this.#disputes(changed)))
  }

  /** Counts a stream the server closed. */
  disconnected(reason: StreamDisconnectReason): void {
    this.disconnects.set(reason, (this.disconnects.get(reason) ?? 0) + 1)
  }

  get openStreams(): number {
    return this.#open
  }

  /**
   * Takes a place among the rental's streams (StreamPlaces.take: StreamLimitError past the
   * cap, StreamPlacesUnavailableError when it cannot be counted); `onLost` ends the stream
   * if the place is lost. Give it back with `release`, once.
   */
  async take(rentalId: string, onLost: () => void): Promise<StreamPlace> {
    const place = await this.#o.places.take(rentalId, onLost)
    this.#open++
    return place
  }

  release(place: StreamPlace, session?: StreamSession): void {
    place.release()
    this.#open--
    if (session !== undefined) this.forget(place.rentalId, session)
  }

  /** Drops a session whose place was given back before it was known. */
  forget(rentalId: string, session: StreamSession): void {
    session.stop()
    const set = this.#byRental.get(rentalId)
    set?.delete(session)
    if (set?.size === 0) this.#byRental.delete(rentalId)
  }

  /** Opens a stream on a place taken with `take`: replays from after `resume` (an event id's position, or a seq; the rental's start when undefined), then live. */
  async open(rental: RentalRecord, sink: EventSink, resume: EventPosition | number | undefined): Promise<StreamSession> {
    const position = typeof resume === 'number' ? { seq: resume, end: false } : resume
    const start = position === undefined ? undefined : cursorOf(position, this.#o.registry, rental.source_id)
    const session = new StreamSession(rental, this.#o.log, this.#o.tail, (id) => this.#o.rentals.get(id), sink, start, this.#o.registry, this.#o.latency)
    let set = this.#byRental.get(rental.rental_id)
    if (set === undefined) this.#byRental.set(rental.rental_id, (set = new Set()))
    set.add(session)
    await session.start()
    const now = this.#o.rentals.get(rental.rental_id)
    if (now !== undefined && isFinal(now)) this.#scheduleEnd(now, [session])
    return session
  }

  #changed(rental: RentalRecord): void {
    const current = this.#o.rentals.get(rental.rental_id)
    if (current !== undefined && isFinal(current) && this.#byRental.has(rental.rental_id)) this.#scheduleEnd(current)
  }

  /** Once the end has settled and the tail has passed the log's end of that moment, each stream sends byo.rental.ended and closes. */
  #scheduleEnd(rental: RentalRecord, only?: StreamSession[]): void {
    if (only === undefined) {
      if (this.#ending.has(rental.rental_id)) return
      this.#ending.add(rental.rental_id)
    }
    const endedAt = Date.parse(rental.ended_at ?? rental.expires_at ?? '') || this.#now()
    const wait = Math.max(0, endedAt + this.#o.endSettleMs - this.#now())
    const timer = setTimeout(() => {
      this.#timers.delete(timer)
      void this.#o.log.info().then(
        (info) => {
          for (const s of only ?? this.#byRental.get(rental.rental_id) ?? []) s.endAfter(info.lastSeq)
          this.#ending.delete(rental.rental_id)
        },
        () => this.#ending.delete(rental.rental_id),
      )
    }, wait)
    this.#timers.add(timer)
  }

  /** A recorded accepted dispute: the streams of its source's rentals send its events in their place (each session picks its rental's). */
  #disputes(changed: readonly DisputeRecord[]): void {
    for (const d of changed) {
      if (d.state !== 'accepted' || d.after_seq == null) continue
      for (const [rentalId, sessions] of this.#byRental) {
        if (this.#o.rentals.get(rentalId)?.source_id !== d.source_id) continue
        for (const s of sessions) s.disputesChanged(d.after_seq)
      }
    }
  }

  /** Tells every open stream of the rental in this process a notice (its webhook's health). */
  notice(rentalId: string, notice: { readonly event: string }): void {
    for (const s of this.#byRental.get(rentalId) ?? []) s.notice(notice)
  }

  /** Stops the watches and timers; open streams are the gateway's to close. */
  close(): void {
    for (const stop of this.#stops) stop()
    for (const t of this.#timers) clearTimeout(t)
    this.#timers.clear()
  }
}
