import type { LogRecord, LostRange } from '../../pipeline/index.js'
import type { TailListener } from '../live-tail.js'
import { CHUNK_RECORDS } from './catch-up-reads.js'
import type { LoopContext } from './loop-context.js'
import { retryDelayMs } from './retry-schedule.js'
import { eventIdOf, webhookEventOf, webhookIdOf } from './webhook-event.js'
import type { DeliveryAttempt, PendingDelivery } from './webhook-state.js'

/** Records the tail handed over and the loop has not taken yet; past this it drops them and reads the log instead. */
export const QUEUE_LIMIT = 4096
/** An idle loop stores the tail's position at a checkpoint once it is this far ahead of the stored one. */
const CHECKPOINT_RECORDS = 1024
/** Events delivered between two writes of the position and the attempts (one run), at most. */
export const RUN_MAX_EVENTS = 256
/** How long a run lasts at most before its position and attempts are written. */
const RUN_MAX_MS = 1000
/** A run also ends once no record came for this long. */
const IDLE_FLUSH_MS = 100
/** While deliveries succeed, the endpoint's `last_success_at` is written at most this often. */
export const SUCCESS_WRITE_EVERY_MS = 60_000

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    if (signal.aborted) return resolve()
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
  })

/**
 * One rental's deliveries, in log order, one event at a time. Its records come from the
 * process's one tail of the log, which hands each record only to the loops of its source:
 * an append wakes those loops and no other, and an idle loop holds no timer and no read
 * of the log, only its place in the tail's listeners. After a start, a dropped queue
 * (over QUEUE_LIMIT) or records the tail lost, the loop reads the log itself from its
 * position until it has caught up.
 *
 * Durable state is written per run of events, not per event: the position (every seq at
 * or below it is delivered, dead-lettered or not the rental's) and the attempts of the
 * run together once RUN_MAX_EVENTS were delivered, RUN_MAX_MS passed, the queue ran dry,
 * an attempt failed, or the loop stops. A crash re-sends at most that run, with the same
 * webhook-ids (at least once). The position never passes an event before its delivery
 * or its dead letter is written; a failure writes the run so far, the attempt and the
 * retry state before waiting.
 */
export class RentalLoop implements TailListener {
  readonly rentalId: string
  readonly #c: LoopContext
  readonly #stop: AbortSignal
  #queue: LogRecord[] = []
  /** The log is to be read from #next: at the start, after a dropped queue, after a loss. */
  #gap = true
  /** Every seq below it is done with. */
  #next = 1
  /** The position stored. */
  #stored = 0
  #pending: PendingDelivery | null = null
  #pendingStored = false
  #attempts: DeliveryAttempt[] = []
  /** Attempts of a flush whose write is under way. */
  #flushing: readonly DeliveryAttempt[] = []
  #lastSuccessAt: number | null = null
  #wake: (() => void) | undefined
  #poked = true
  /** Queues dropped (and losses told) since the start. */
  #drops = 0
  /** Catch-up reads numbered above this began after the loop listened to the tail. */
  #since = 0
  /** Every record handed over is done with: the loop waits for more (what lets the position follow the tail). */
  #settled = false

  constructor(rentalId: string, context: LoopContext, stop: AbortSignal) {
    this.rentalId = rentalId
    this.#c = context
    this.#stop = stop
    stop.addEventListener('abort', () => this.#wakeUp(), { once: true })
  }

  /** True while the loop has done everything handed to it and waits for more. */
  get waiting(): boolean {
    return this.#settled
  }

  /** Attempts made and not yet written (oldest first): the deliveries list shows them at once. */
  unwritten(): DeliveryAttempt[] {
    return [...this.#flushing, ...this.#attempts]
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

  #wakeUp(): void {
    const wake = this.#wake
    this.#wake = undefined
    wake?.()
  }

  async run(): Promise<void> {
    const { state, log, tail } = this.#c
    const first = this.#c.rental(this.rentalId)
    const endpoint = this.#c.endpoint(this.rentalId)
    if (first === undefined || endpoint === undefined) return
    // Listening before the first read: whatever the tail hands out from now on is queued,
    // and the read covers everything before it, so nothing falls between them.
    const unlisten = tail.listen(first.source_id, this)
    this.#since = this.#c.catchUp.mark()
    const listenedAt = { tail: tail.position, drops: this.#drops }
    try {
      const stored = await state.position(this.rentalId)
      // Deliveries of releases that kept the position in a log consumer of their own resume from it.
      const legacy = stored === null ? await log.consumerInfo(`webhook-${this.rentalId}`) : null
      // Never before the endpoint's start: a position left by an endpoint removed meanwhile on another process is older.
      this.#stored = Math.max(stored ?? 0, endpoint.start_seq - 1, legacy?.ackSeq ?? 0)
      this.#next = this.#stored + 1
      // Done with everything up to where the tail was when the loop began listening (a clean restart): the tail hands it the rest.
      if (this.#stored >= listenedAt.tail && this.#drops === listenedAt.drops) this.#gap = false
      this.#pending = await state.pending(this.rentalId)
      this.#pendingStored = this.#pending !== null
      if (legacy !== null) {
        await state.advancePosition(this.rentalId, this.#stored)
        await log.deleteConsumer(legacy.name).catch(() => false)
      }
      await this.#loop()
    } finally {
      unlisten()
      // A loop stopped while it waited is done with everything up to the tail's position.
      if (this.#settled && this.#queue.length === 0 && !this.#gap) this.#next = Math.max(this.#next, this.#c.tail.position + 1)
      await this.#flush()
    }
  }

  /**
   * Stores the tail's position as the loop's own when the loop waits and the tail got
   * CHECKPOINT_RECORDS past it: a rental of a quiet source then has little to read again
   * after a crash. Called by the workers now and then.
   */
  async checkpoint(): Promise<void> {
    const to = this.#c.tail.position
    if (!this.#settled || this.#queue.length > 0 || this.#gap || to - this.#stored < CHECKPOINT_RECORDS) return
    this.#next = Math.max(this.#next, to + 1)
    await this.#flush()
  }

  async #loop(): Promise<void> {
    let runStarted = performance.now()
    let runEvents = 0
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
        // this rental's, so the position may move up to the tail's.
        this.#next = Math.max(this.#next, this.#c.tail.position + 1)
        this.#settled = true
        // A run ends once no record came for IDLE_FLUSH_MS: records arriving one by one
        // still share their writes. Only a loop with something to write holds a timer.
        if (!this.#dirty()) await this.#idle()
        else if (!(await this.#idle(IDLE_FLUSH_MS))) {
          await this.#flush()
          runStarted = performance.now()
          runEvents = 0
        }
        continue
      }
      for (const record of batch) {
        if (record.seq < this.#next) continue
        // Records of journals written before sources were tagged ('') are decoded to tell.
        if (record.sourceId === '' || record.sourceId === rental.source_id) {
          const event = webhookEventOf(record, rental)
          if (event !== undefined) {
            if ((await this.#deliver(record.seq, event)) === 'stopped') return
            runEvents++
          }
        }
        this.#next = record.seq + 1
        // An event that needed retries ends the run at once: its retry state is cleared with the position past it.
        if (this.#pendingStored || runEvents >= RUN_MAX_EVENTS || performance.now() - runStarted >= RUN_MAX_MS) {
          await this.#flush()
          runStarted = performance.now()
          runEvents = 0
        }
        if (this.#stop.aborted) return
      }
      this.#next = Math.max(this.#next, through + 1)
    }
  }

  #dirty(): boolean {
    return this.#attempts.length > 0 || this.#next - 1 > this.#stored || this.#lastSuccessAt !== null || (this.#pendingStored && (this.#pending === null || this.#pending.seq < this.#next))
  }

  /** Waits for records, a poke or the stop; false when `ms` passed first. */
  #idle(ms?: number): Promise<boolean> {
    if (this.#queue.length > 0 || this.#gap || this.#poked || this.#stop.aborted) return Promise.resolve(true)
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
   * Reads the log from #next (catching up), telling the rental of a range retention
   * removed first. Keeps only the records that may be the rental's, so a loop waiting on
   * its receiver holds its own records, not a read's worth of every source's.
   */
  async #read(sourceId: string): Promise<{ records: readonly LogRecord[]; through: number }> {
    // Cleared before the read: a queue dropped while it runs sets it again.
    this.#gap = false
    const from = this.#next
    const chunk = await this.#c.catchUp.chunk(from, this.#since)
    if (chunk.length === CHUNK_RECORDS) this.#gap = true
    const firstSeq = chunk.find((r) => r.seq >= from)?.seq
    if (firstSeq !== undefined && firstSeq > from && this.#next === from) {
      const error = `${firstSeq - from} log records left retention before they were delivered`
      const at = new Date(this.#c.now()).toISOString()
      this.#attempts.push({ webhook_id: '', event_id: `${eventIdOf(from)}-${eventIdOf(firstSeq - 1)}`, attempt: 0, attempted_at: at, result: 'lost', status: null, error, duration_ms: 0, next_attempt_at: null })
      this.#next = firstSeq
      await this.#flush()
    }
    const own = chunk.filter((r) => r.seq >= from && (r.sourceId === '' || r.sourceId === sourceId))
    return { records: own, through: chunk[chunk.length - 1]?.seq ?? 0 }
  }

  async #resend(): Promise<'stopped' | undefined> {
    const { state, log } = this.#c
    for (let seq = await state.nextResend(this.rentalId); seq !== undefined && !this.#stop.aborted; seq = await state.nextResend(this.rentalId)) {
      const rental = this.#c.rental(this.rentalId)
      if (rental === undefined) return 'stopped'
      const [record] = await log.read({ fromSeq: seq }, 1)
      const event = record?.seq === seq ? webhookEventOf(record, rental) : undefined
      if (event !== undefined && (await this.#deliver(seq, event)) === 'stopped') return 'stopped'
      await this.#flush()
      await state.resent(this.rentalId, seq)
    }
    return undefined
  }

  /** Writes what the run did: its attempts, the position, a cleared retry state, the endpoint's success. */
  async #flush(): Promise<void> {
    const { state } = this.#c
    const attempts = this.#attempts
    this.#attempts = []
    this.#flushing = attempts
    const through = this.#next - 1
    const writes: Promise<void>[] = [state.addAttempts(this.rentalId, attempts).finally(() => void (this.#flushing = []))]
    if (through > this.#stored) writes.push(state.advancePosition(this.rentalId, through).then(() => void (this.#stored = Math.max(this.#stored, through))))
    if (this.#pendingStored && (this.#pending === null || this.#pending.seq <= through)) {
      writes.push(state.setPending(this.rentalId, null).then(() => void (this.#pendingStored = false)))
      this.#pending = null
    }
    const succeeded = this.#lastSuccessAt
    const endpoint = this.#c.endpoint(this.rentalId)
    if (succeeded !== null && endpoint !== undefined) {
      const last = endpoint.last_success_at === null ? null : Date.parse(endpoint.last_success_at)
      if (endpoint.failing_since !== null || last === null || succeeded - last >= SUCCESS_WRITE_EVERY_MS) {
        const at = new Date(succeeded).toISOString()
        writes.push(this.#c.markEndpoint(this.rentalId, (e) => ({ ...e, last_success_at: at, failing_since: null })))
      }
    }
    this.#lastSuccessAt = null
    // Issued together, so the store can commit them as one group.
    const results = await Promise.allSettled(writes)
    const failed = results.find((r) => r.status === 'rejected')
    if (failed !== undefined) throw (failed as PromiseRejectedResult).reason
  }

  /** Tries one event until it is delivered, dead-lettered, or the endpoint stops. */
  async #deliver(seq: number, event: Record<string, unknown>): Promise<'delivered' | 'dead' | 'stopped'> {
    const c = this.#c
    const { state } = c
    let pending = this.#pending?.seq === seq ? this.#pending : { seq, first_attempt_at: c.now(), attempts: 0, next_at: 0 }
    const webhookId = webhookIdOf(this.rentalId, seq)
    const body = JSON.stringify(event)
    for (;;) {
      const wait = pending.next_at - c.now()
      if (wait > 0) await sleep(wait, this.#stop)
      const endpoint = c.endpoint(this.rentalId)
      if (this.#stop.aborted || endpoint?.state !== 'enabled') return 'stopped'
      const at = c.now()
      const outcome = await c.send(endpoint.url, webhookId, body, at)
      c.onAttempt(outcome.result)
      const attempts = pending.attempts + 1
      const base = { webhook_id: webhookId, event_id: eventIdOf(seq), attempt: attempts, attempted_at: new Date(at).toISOString(), result: outcome.result, status: outcome.status, error: outcome.error, duration_ms: outcome.durationMs }
      if (outcome.result === 'delivered') {
        this.#attempts.push({ ...base, next_attempt_at: null })
        this.#lastSuccessAt = at
        return 'delivered'
      }
      const failingSince = endpoint.failing_since === null ? at : Date.parse(endpoint.failing_since)
      const disable = outcome.result === 'gone' ? 'gone' : at - failingSince >= c.disableAfterMs ? 'failing' : null
      if (disable !== null) {
        this.#attempts.push({ ...base, next_attempt_at: null })
        await this.#setPending({ ...pending, attempts })
        await this.#flush()
        await c.markEndpoint(this.rentalId, (e) => ({ ...e, state: 'disabled', disabled_reason: disable, disabled_at: base.attempted_at, failing_since: e.failing_since ?? base.attempted_at }))
        return 'stopped'
      }
      if (endpoint.failing_since === null) await c.markEndpoint(this.rentalId, (e) => ({ ...e, failing_since: e.failing_since ?? base.attempted_at }))
      if (at - pending.first_attempt_at >= c.retryWindowMs) {
        this.#attempts.push({ ...base, next_attempt_at: null })
        await state.addDeadLetter(this.rentalId, { webhook_id: webhookId, event_id: eventIdOf(seq), seq, dead_at: base.attempted_at, attempts, last_error: outcome.error })
        c.onDeadLetter()
        return 'dead'
      }
      const nextAt = at + retryDelayMs(attempts, c.retryDelaysMs, outcome.retryAfterMs)
      this.#attempts.push({ ...base, next_attempt_at: new Date(nextAt).toISOString() })
      pending = { ...pending, attempts, next_at: nextAt }
      // Before the wait: the run so far, this attempt and the retry state, so a restart resumes the retries.
      await this.#setPending(pending)
      await this.#flush()
    }
  }

  async #setPending(pending: PendingDelivery): Promise<void> {
    this.#pending = pending
    await this.#c.state.setPending(this.rentalId, pending)
    this.#pendingStored = true
  }
}
