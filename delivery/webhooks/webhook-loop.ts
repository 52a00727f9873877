import { placementIn, type LogRecord, type LostRange } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import type { TailListener } from '../live-tail.js'
import { DisputeQueue, type RentalCursor } from '../rental-events.js'
import { CHUNK_RECORDS } from './catch-up-reads.js'
import type { LoopContext } from './loop-context.js'
import { LoopWrites, resumePoint } from './loop-writes.js'
import { RUN_MAX_EVENTS, RUN_MAX_MS } from './run-bounds.js'
import { deliverEvent } from './loop-deliver.js'
import { eventIdOf, webhookEventOf } from './webhook-event.js'
import { mayPassNow, placeOfPending } from './webhook-disputes.js'
import type { DeliveryAttempt } from './webhook-state.js'
import { passesFilter, type FilteredFields } from '../../schemas/index.js'

/** Records the tail handed over and the loop has not taken yet; past this it drops them and reads the log instead. */
export const QUEUE_LIMIT = 4096
/** An idle loop stores the tail's position at a checkpoint once it is this far ahead of the stored one. */
const CHECKPOINT_RECORDS = 1024
/** A run also ends once no record came for this long. */
const IDLE_FLUSH_MS = 100

/**
 * One rental's deliveries, in the rental's order (rental-events.ts: its log records, and
 * the accepted disputes' events placed among them), one event at a time. Its records come
 * from the process's one tail of the log, which hands each record only to the loops of its
 * source: an append wakes those loops and no other, and an idle loop holds no timer and no
 * read of the log, only its place in the tail's listeners. After a start, a dropped queue
 * (over QUEUE_LIMIT) or records the tail lost, the loop reads the log itself from its
 * position until it has caught up. A dispute accepted while the loop waits wakes it once
 * the tail has passed the record the dispute is placed after.
 *
 * State is written per run of events (loop-writes.ts), so a crash re-sends at most the
 * last run (RUN_MAX_EVENTS, RUN_MAX_MS), with the same webhook-ids. The position never
 * passes an event before its delivery or dead letter is written, a dispute event not yet
 * delivered, or a dispute placement whose dispute is not settled (registry's gate).
 */
export class RentalLoop implements TailListener {
  readonly rentalId: string
  readonly #c: LoopContext
  readonly #stop: AbortSignal
  readonly #w: LoopWrites
  #queue: LogRecord[] = []
  /** The log is to be read from after the cursor: at the start, after a dropped queue, after a loss. */
  #gap = true
  /** Every event at or before it is done with. */
  #cursor: RentalCursor = { seq: 0 }
  #wake: (() => void) | undefined
  #poked = true
  /** A dispute was accepted for the rental's source: look for its events. */
  #disputed = false
  /** Queues dropped (and losses told) since the start. */
  #drops = 0
  /** Catch-up reads numbered above this began after the loop listened to the tail. */
  #since = 0
  /** Every record handed over is done with: the loop waits for more (what lets the position follow the tail). */
  #settled = false
  #runStarted = 0
  #runEvents = 0
  /** Ends the wait for an event's next attempt, while there is one. */
  #endWait: (() => void) | undefined

  constructor(rentalId: string, context: LoopContext, stop: AbortSignal) {
    this.rentalId = rentalId
    this.#c = context
    this.#stop = stop
    this.#w = new LoopWrites(rentalId, context)
    stop.addEventListener('abort', () => this.#wakeUp(), { once: true })
  }

  /** True while the loop has done everything handed to it and waits for more. */
  get waiting(): boolean {
    return this.#settled
  }

  /** Attempts made and not yet written (oldest first): the deliveries list shows them at once. */
  unwritten(): DeliveryAttempt[] {
    return this.#w.unwritten()
  }

  /** From the tail: records of the rental's source, in order. */
  records(records: readonly LogRecord[]): void {
    if (this.#queue.length + records.length > QUEUE_LIMIT) {
      this.#dropQueue()
    } else for (const r of records) this.#queue.push(r)
    this.#wakeUp()
  }

  /** From the tail: it fell behind retention; the loop's own read tells the rental what it lost. */
  lost(_range: LostRange): void {
    this.#dropQueue()
    this.#wakeUp()
  }

  /** The log is read instead, by a read begun after now (an earlier one may lack what was dropped). */
  #dropQueue(): void {
    this.#drops++
    this.#queue = []
    this.#gap = true
    this.#since = this.#c.catchUp.mark()
  }

  /** A re-send was asked for: look at the re-send list now. */
  poke(): void {
    this.#poked = true
    this.#wakeUp()
  }

  /** A dispute of the rental's source was accepted and the tail has passed its place: deliver its events. */
  disputed(): void {
    this.#disputed = true
    this.#wakeUp()
  }

  #wakeUp(): void {
    const wake = this.#wake
    this.#wake = undefined
    wake?.()
  }

  async run(): Promise<void> {
    const { state, tail } = this.#c
    const first = this.#c.rental(this.rentalId)
    const endpoint = this.#c.endpoint(this.rentalId)
    if (first === undefined || endpoint === undefined) return
    // Listening before the first read: whatever the tail hands out from now on is queued,
    // and the read covers everything before it, so nothing falls between them.
    const unlisten = tail.listen(first.source_id, this)
    this.#since = this.#c.catchUp.mark()
    const listenedAt = { tail: tail.position, drops: this.#drops }
    try {
      const resume = await resumePoint(this.#c, this.rentalId, endpoint.start_seq)
      this.#cursor = resume.cursor
      this.#w.stored = resume.stored
      // Done with everything up to where the tail was when the loop began listening (a clean restart): the tail hands it the rest.
      if (this.#cursor.seq >= listenedAt.tail && this.#drops === listenedAt.drops) this.#gap = false
      const pending = await state.pending(this.rentalId)
      if (pending !== null) {
        this.#w.pending = pending
        this.#w.pendingAt = placeOfPending(pending, this.#c.disputes, first.source_id)
        this.#w.pendingStored = true
      }
      await this.#loop()
    } finally {
      unlisten()
      // A loop stopped while it waited is done with everything up to the tail's position.
      if (this.#settled && this.#queue.length === 0 && !this.#gap) this.#passNow(this.#c.tail.position)
      await this.#w.flush(this.#cursor)
    }
  }

  /**
   * Stores the tail's position as the loop's own when the loop waits and the tail got
   * CHECKPOINT_RECORDS past it: a rental of a quiet source then has little to read again
   * after a crash. Called by the workers now and then.
   */
  async checkpoint(): Promise<void> {
    const to = this.#c.tail.position
    if (!this.#settled || this.#queue.length > 0 || this.#gap || to - this.#w.stored.seq < CHECKPOINT_RECORDS) return
    this.#passNow(to)
    await this.#w.flush(this.#cursor)
  }

  /**
   * Moves the cursor to after record `seq` without waiting, when that passes no dispute
   * event due (the caller is done with the rental's records up to `seq`, the placements
   * among them included).
   */
  #passNow(seq: number): void {
    const rental = this.#c.rental(this.rentalId)
    if (seq > this.#cursor.seq && rental !== undefined && mayPassNow(this.#c.disputes, rental, this.#cursor, seq)) this.#cursor = { seq }
  }

  /**
   * Moves the cursor to after record `seq` (the caller is done with the rental's records
   * up to it, the dispute placements among them waited at), delivering first the dispute
   * events placed up to there.
   */
  async #passTo(seq: number, rental: RentalRecord): Promise<'stopped' | undefined> {
    if ((await this.#disputesThrough(seq, rental)) === 'stopped') return 'stopped'
    if (seq > this.#cursor.seq) this.#cursor = { seq }
    return undefined
  }

  /** Delivers the dispute events after the cursor placed up to after record `seq` (the rental's records up to it are done). */
  async #disputesThrough(seq: number, rental: RentalRecord): Promise<'stopped' | undefined> {
    if (this.#c.disputes.acceptedDisputesOf(rental.source_id).length === 0) return undefined
    const queue = new DisputeQueue(this.#c.disputes, this.#c.rental(this.rentalId) ?? rental, this.#cursor, seq)
    for (let d = queue.through(seq); d !== undefined; d = queue.through(seq)) {
      if ((await this.#send(d.cursor, d.event.event_id, d.event as unknown as Record<string, unknown>)) === 'stopped') return 'stopped'
      this.#cursor = d.cursor
      await this.#eventDone()
    }
    return undefined
  }

  /** Ends the run once it is long enough, or at once after an event that needed retries (its retry state is cleared with the position past it). */
  async #eventDone(): Promise<void> {
    this.#runEvents++
    if (this.#w.pendingStored || this.#runEvents >= RUN_MAX_EVENTS || performance.now() - this.#runStarted >= RUN_MAX_MS) await this.#flush()
  }

  async #flush(): Promise<void> {
    await this.#w.flush(this.#cursor)
    this.#runStarted = performance.now()
    this.#runEvents = 0
  }

  async #loop(): Promise<void> {
    this.#runStarted = performance.now()
    while (!this.#stop.aborted) {
      this.#settled = false
      if (this.#poked) {
        this.#poked = false
        if ((await this.#resend()) === 'stopped') return
        continue
      }
      const rental = this.#c.rental(this.rentalId)
      if (rental === undefined) return
      let batch: readonly LogRecord[]
      /** The last seq a catch-up read covered: its other sources' records were dropped from the batch. */
      let through = 0
      if (this.#gap) ({ records: batch, through } = await this.#read(rental.source_id))
      else if (this.#queue.length > 0) {
        batch = this.#queue
        this.#queue = []
      } else {
        // Idle: every record the tail handed out so far was queued (and is done) or not
        // this rental's, so the position may move up to the tail's, past the dispute
        // events placed up to there, which are delivered now.
        this.#disputed = false
        if ((await this.#passTo(this.#c.tail.position, rental)) === 'stopped') return
        if (this.#queue.length > 0 || this.#gap || this.#poked || this.#disputed) continue
        this.#settled = true
        // A run ends once no record came for IDLE_FLUSH_MS: records arriving one by one
        // still share their writes. Only a loop with something to write holds a timer.
        if (!this.#w.dirty(this.#cursor)) await this.#idle()
        else if (!(await this.#idle(IDLE_FLUSH_MS))) await this.#flush()
        continue
      }
      for (const record of batch) {
        if (record.seq <= this.#cursor.seq) continue
        // The dispute events placed before this record go first.
        if ((await this.#disputesThrough(record.seq - 1, rental)) === 'stopped') return
        // A dispute placement: nothing goes past it until its dispute is recorded (its events then go before the next record).
        const mark = record.sourceId === rental.source_id ? placementIn(record) : undefined
        if (mark !== undefined) await this.#c.disputes.disputeGate.until(mark)
        // Records of journals written before sources were tagged ('') are decoded to tell. The
        // rental as it is now: a batch can outlast its end (attempts and their retries take time).
        const current = this.#c.rental(this.rentalId) ?? rental
        const event = record.sourceId === '' || record.sourceId === current.source_id ? webhookEventOf(record, current) : undefined
        if (event !== undefined && (await this.#send({ seq: record.seq }, eventIdOf(record.seq), event, record.time, () => this.#wanted(event))) === 'stopped') return
        this.#cursor = { seq: record.seq }
        if (event !== undefined) await this.#eventDone()
        if (this.#stop.aborted) return
      }
      if (through > this.#cursor.seq && (await this.#passTo(through, rental)) === 'stopped') return
    }
  }

  /** Waits for records, a poke, a dispute or the stop; false when `ms` passed first. */
  #idle(ms?: number): Promise<boolean> {
    if (this.#queue.length > 0 || this.#gap || this.#poked || this.#disputed || this.#stop.aborted) return Promise.resolve(true)
    return new Promise<boolean>((resolve) => {
      const timer = ms === undefined ? undefined : setTimeout(() => {
        if (this.#wake === woke) this.#wake = undefined
        resolve(false)
      }, ms)
      const woke = () => {
        clearTimeout(timer)
        resolve(true)
      }
      this.#wake = woke
    })
  }

  /**
   * Reads the log from after the cursor (catching up), telling the rental of a range
   * retention removed first. Keeps only the records that may be the rental's, so a loop
   * waiting on its receiver holds its own records, not a read's worth of every source's.
   */
  async #read(sourceId: string): Promise<{ records: readonly LogRecord[]; through: number }> {
    // Cleared before the read: a queue dropped while it runs sets it again.
    this.#gap = false
    const from = this.#cursor.seq + 1
    const chunk = await this.#c.catchUp.chunk(from, this.#since)
    if (chunk.length === CHUNK_RECORDS) this.#gap = true
    const firstSeq = chunk.find((r) => r.seq >= from)?.seq
    if (firstSeq !== undefined && firstSeq > from && this.#cursor.seq + 1 === from) {
      const error = `${firstSeq - from} log records left retention before they were delivered`
      const at = new Date(this.#c.now()).toISOString()
      this.#w.attempt({ webhook_id: '', event_id: `${eventIdOf(from)}-${eventIdOf(firstSeq - 1)}`, attempt: 0, attempted_at: at, result: 'lost', status: null, error, duration_ms: 0, next_attempt_at: null })
      // Dispute events placed among the lost records go with them.
      this.#cursor = { seq: firstSeq - 1 }
      await this.#flush()
    }
    const own = chunk.filter((r) => r.seq >= from && (r.sourceId === '' || r.sourceId === sourceId))
    return { records: own, through: chunk[chunk.length - 1]?.seq ?? 0 }
  }

  /** Tries one event (placed at `at`) until it is delivered, dead-lettered, skipped (`wanted` turned false), or the loop stops (also when its shard was lost). */
  #send(at: RentalCursor, eventId: string, event: Record<string, unknown>, storedAtMs?: number, wanted?: () => boolean): Promise<'delivered' | 'dead' | 'skipped' | 'stopped'> {
    return deliverEvent({ c: this.#c, w: this.#w, rentalId: this.rentalId, stop: this.#stop, flush: () => this.#flush(), pause: (ms) => this.#pause(ms) }, at, eventId, event, storedAtMs, wanted)
  }

  /** Whether the rental's filter, as it is now, still lets a signal's event through. */
  #wanted(event: Record<string, unknown>): boolean {
    return passesFilter(this.#c.rental(this.rentalId)?.filter, event as unknown as FilteredFields)
  }

  /**
   * Ends a wait for an event's next attempt: the endpoint changed (a retry was asked for,
   * the URL set again, a re-send queued) or the rental did (its filter), so the attempt
   * loop looks again at once.
   */
  nudge(): void {
    const wake = this.#endWait
    this.#endWait = undefined
    wake?.()
  }

  /** Waits `ms`, until the stop, or until a nudge. */
  #pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      if (this.#stop.aborted) return resolve()
      const done = () => {
        clearTimeout(timer)
        this.#stop.removeEventListener('abort', done)
        if (this.#endWait === done) this.#endWait = undefined
        resolve()
      }
      const timer = setTimeout(done, ms)
      this.#stop.addEventListener('abort', done, { once: true })
      this.#endWait = done
    })
  }

  async #resend(): Promise<'stopped' | undefined> {
    const { state, log } = this.#c
    for (let seq = await state.nextResend(this.rentalId); seq !== undefined && !this.#stop.aborted; seq = await state.nextResend(this.rentalId)) {
      const rental = this.#c.rental(this.rentalId)
      if (rental === undefined) return 'stopped'
      const [record] = await log.read({ fromSeq: seq }, 1)
      // Queued on request (one event named, or those the filter let through when asked): delivered as asked.
      const event = record?.seq === seq ? webhookEventOf(record, rental, true) : undefined
      if (event !== undefined && (await this.#send({ seq }, eventIdOf(seq), event)) === 'stopped') return 'stopped'
      await this.#flush()
      await state.resent(this.rentalId, seq)
    }
    return undefined
  }
}
