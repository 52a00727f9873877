import type { Dispatcher } from 'undici'
import { request } from 'undici'
import type { LogConsumer, SignalLog } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { deliverableEnd, DisputeQueue, type RentalCursor, type RentalDisputes } from '../rental-events.js'
import { deliverDisputeEvents } from './webhook-disputes.js'
import type { DeliveryKeys } from './delivery-keys.js'
import { parseRetryAfter, retryDelayMs } from './retry-schedule.js'
import { eventIdOf, webhookEventOf, webhookIdOf } from './webhook-event.js'
import type { WebhookEndpoint, WebhookState } from './webhook-state.js'
import { WebhookUrlError } from './webhook-url.js'

export interface WebhookWorkerOptions {
  readonly log: SignalLog
  readonly state: WebhookState
  readonly keys: DeliveryKeys
  readonly rental: (rentalId: string) => RentalRecord | undefined
  /** The accepted disputes, delivered in their place among the records (the registry). */
  readonly disputes: RentalDisputes
  /** An undici dispatcher whose connections pass the SSRF guard. */
  readonly dispatcher: Dispatcher
  /** Per attempt, connection to last body byte (10 s). */
  readonly timeoutMs: number
  readonly retryDelaysMs: readonly number[]
  /** Retries stop once this long has passed since the event's first attempt: it is dead-lettered. */
  readonly retryWindowMs: number
  /** An endpoint with no success for this long is disabled. */
  readonly disableAfterMs: number
  readonly now?: () => number
  /** Attempts under way at once, all rentals together (WEBHOOK_CONCURRENCY). */
  readonly maxConcurrent?: number
  readonly onAttempt?: (result: string) => void
  readonly onDeadLetter?: () => void
  readonly onError?: (err: unknown, rentalId: string) => void
  /** Whether this process runs the rental's loop now (it holds the rental's lease shard); every rental when omitted. */
  readonly owns?: (rentalId: string) => boolean
}

export interface AttemptOutcome {
  readonly result: string
  readonly status: number | null
  readonly error: string | null
  readonly retryAfterMs: number | undefined
  readonly durationMs: number
}

/** Bytes of a receiver's answer read before the connection is let go: only the status matters. */
const MAX_ANSWER_BYTES = 64 * 1024
/** How long a worker's wait for new records lasts before it looks again (appends wake it sooner). */
const FETCH_WAIT_MS = 30_000
/** The pause before a loop that failed on its storage starts again. */
const LOOP_RESTART_MS = 5_000

/** One POST of a signed event; never throws. */
export async function sendWebhook(options: Pick<WebhookWorkerOptions, 'dispatcher' | 'keys' | 'timeoutMs'>, url: string, webhookId: string, body: string, now: number): Promise<AttemptOutcome> {
  const started = performance.now()
  const timestamp = Math.floor(now / 1000)
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'signal-ingest-gateway-webhooks/1',
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': options.keys.signature(webhookId, timestamp, body),
  }
  const took = () => Math.round(performance.now() - started)
  try {
    const res = await request(url, { method: 'POST', headers, body, dispatcher: options.dispatcher, signal: AbortSignal.timeout(options.timeoutMs), headersTimeout: options.timeoutMs, bodyTimeout: options.timeoutMs })
    await res.body.dump({ limit: MAX_ANSWER_BYTES }).catch(() => undefined)
    const status = res.statusCode
    const retryAfterMs = parseRetryAfter(res.headers['retry-after'], now)
    if (status >= 200 && status < 300) return { result: 'delivered', status, error: null, retryAfterMs: undefined, durationMs: took() }
    if (status === 410) return { result: 'gone', status, error: 'the receiver answered 410 Gone', retryAfterMs, durationMs: took() }
    if (status >= 300 && status < 400) return { result: 'redirect', status, error: 'redirects are not followed', retryAfterMs, durationMs: took() }
    return { result: 'http_status', status, error: `the receiver answered ${status}`, retryAfterMs, durationMs: took() }
  } catch (err) {
    const e = err as Error & { code?: string }
    if (err instanceof WebhookUrlError) return { result: 'refused_address', status: null, error: err.message, retryAfterMs: undefined, durationMs: took() }
    const timedOut = e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT' || e.code === 'UND_ERR_CONNECT_TIMEOUT'
    return { result: timedOut ? 'timeout' : 'connection', status: null, error: timedOut ? `no answer within ${options.timeoutMs} ms` : `${e.code ?? e.name}: ${e.message}`, retryAfterMs: undefined, durationMs: took() }
  }
}

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
 * Delivers each rental's events to its webhook: one loop per enabled endpoint, each on
 * its own durable log consumer (`webhook-<rental_id>`, filtered to the rental's source),
 * one event at a time in log order, acknowledged once delivered or dead-lettered. So a
 * slow or failing receiver holds only its own rental's queue, and a restart resumes at
 * the first event not acknowledged, with its retry count and window kept in the state.
 */
export class WebhookWorkers {
  readonly #o: WebhookWorkerOptions
  readonly #now: () => number
  readonly #loops = new Map<string, { abort: AbortController; done: Promise<void>; poke: () => void }>()
  readonly #endpoints = new Map<string, WebhookEndpoint>()
  #watch: ReturnType<WebhookState['watchEndpoints']> | undefined
  #unwatchDisputes: (() => void) | undefined
  #watching: Promise<void> | undefined
  #closed = false
  #inFlight = 0
  readonly #waiting: (() => void)[] = []

  constructor(options: WebhookWorkerOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
  }

  /** Follows the endpoints (every process's changes) and runs a loop for each enabled one. */
  async start(): Promise<void> {
    // A dispute accepted while a loop waits at the log's end wakes it: its events are due without a new record.
    this.#unwatchDisputes = this.#o.disputes.watchDisputes((changed) => {
      const sources = new Set(changed.filter((d) => d.state === 'accepted').map((d) => d.source_id))
      for (const [rentalId, loop] of this.#loops) if (sources.has(this.#o.rental(rentalId)?.source_id ?? '')) loop.poke()
    })
    const watch = this.#o.state.watchEndpoints()
    this.#watch = watch
    this.#watching = (async () => {
      for await (const entry of watch) {
        const rentalId = entry.key.slice('endpoint.'.length)
        if (entry.operation === 'DEL') this.#endpoints.delete(rentalId)
        else this.#endpoints.set(rentalId, JSON.parse(Buffer.from(entry.value).toString('utf8')) as WebhookEndpoint)
        this.#reconcile(rentalId)
      }
    })().catch((err: unknown) => this.#o.onError?.(err, ''))
    await watch.initialized
  }

  /** Resolves once the rental's loop has ended (its endpoint was removed or disabled). */
  async stopped(rentalId: string): Promise<void> {
    // Forgotten here at once: the watch may report the removal only after the loop ended, which must not start it again.
    this.#endpoints.delete(rentalId)
    const loop = this.#loops.get(rentalId)
    if (loop === undefined) return
    loop.abort.abort()
    await loop.done
  }

  /** Cuts a loop's wait short (a re-send was asked for). */
  poke(rentalId: string): void {
    this.#loops.get(rentalId)?.poke()
  }

  /** Starts and stops loops after the rentals this process owns changed; resolves once the loops it stopped have ended. */
  async reconcileAll(): Promise<void> {
    for (const rentalId of this.#endpoints.keys()) this.#reconcile(rentalId)
    const ending = [...this.#loops].filter(([rentalId]) => !this.#owns(rentalId)).map(([, loop]) => (loop.abort.abort(), loop.done))
    await Promise.all(ending)
  }

  /** The rentals whose loops run in this process now. */
  running(): string[] {
    return [...this.#loops.keys()]
  }

  #owns(rentalId: string): boolean {
    return this.#o.owns?.(rentalId) ?? true
  }

  #reconcile(rentalId: string): void {
    if (this.#closed) return
    const endpoint = this.#endpoints.get(rentalId)
    const running = this.#loops.get(rentalId)
    if (endpoint?.state === 'enabled' && this.#owns(rentalId)) {
      running?.poke()
      if (running === undefined) this.#startLoop(rentalId)
    } else running?.abort.abort()
  }

  #startLoop(rentalId: string): void {
    const abort = new AbortController()
    let wake = new AbortController()
    const entry = {
      abort,
      poke: () => wake.abort(),
      done: Promise.resolve(),
    }
    const waitSignal = () => {
      if (wake.signal.aborted) wake = new AbortController()
      return AbortSignal.any([abort.signal, wake.signal])
    }
    let failed = false
    entry.done = this.#loop(rentalId, abort.signal, waitSignal)
      .catch((err: unknown) => {
        failed = true
        this.#o.onError?.(err, rentalId)
      })
      .finally(() => {
        if (this.#loops.get(rentalId) === entry) this.#loops.delete(rentalId)
        // A loop that failed (storage unavailable) starts again a little later; an endpoint
        // enabled again while its loop wound down gets a new one now.
        if (failed) setTimeout(() => this.#reconcile(rentalId), LOOP_RESTART_MS).unref()
        else if (abort.signal.aborted && this.#endpoints.get(rentalId)?.state === 'enabled') setImmediate(() => this.#reconcile(rentalId))
      })
    this.#loops.set(rentalId, entry)
  }

  async #loop(rentalId: string, stop: AbortSignal, waitSignal: () => AbortSignal): Promise<void> {
    const endpoint = this.#endpoints.get(rentalId)
    const rental = this.#o.rental(rentalId)
    if (endpoint === undefined || rental === undefined) return
    const consumer: LogConsumer = await this.#o.log.consumer(`webhook-${rentalId}`, { sourceId: rental.source_id, startSeq: endpoint.start_seq })
    const stored = await this.#o.state.disputeCursor(rentalId)
    // The endpoint receives what is placed after the record before its start_seq, disputes included.
    let disputed: RentalCursor = stored === null ? { seq: endpoint.start_seq - 1 } : { seq: stored.seq, dispute: { order: stored.order, signalSeq: stored.signal_seq } }
    try {
      while (!stop.aborted) {
        const resend = await this.#o.state.nextResend(rentalId)
        if (resend !== undefined) {
          const [record] = await this.#o.log.read({ fromSeq: resend }, 1)
          const event = record?.seq === resend ? webhookEventOf(record, rental) : undefined
          if (event !== undefined && (await this.#deliver(rentalId, resend, eventIdOf(resend), event, stop)) === 'stopped') return
          await this.#o.state.resent(rentalId, resend)
          continue
        }
        // Every record of the rental's up to `end` is delivered once a fetch comes back empty.
        const end = await deliverableEnd(this.#o.disputes, async () => (await this.#o.log.info()).lastSeq)
        const owed = new DisputeQueue(this.#o.disputes, this.#o.rental(rentalId) ?? rental, disputed, Infinity).has(Infinity)
        const { records, lost } = await consumer.fetch(16, owed ? 0 : FETCH_WAIT_MS, waitSignal())
        if (lost !== null) {
          await this.#o.state.addAttempt(rentalId, { webhook_id: '', event_id: `${eventIdOf(lost.fromSeq)}-${eventIdOf(lost.toSeq)}`, attempt: 0, attempted_at: new Date(this.#now()).toISOString(), result: 'lost', status: null, error: `${lost.count} log records left retention before they were delivered`, duration_ms: 0, next_attempt_at: null })
        }
        for (const record of records) {
          // Past a dispute being accepted, a record waits until it is recorded, and its events go first.
          await this.#o.disputes.disputeGate.until(record.seq)
          const before = await this.#deliverDisputes(rentalId, rental, disputed, record.seq - 1, stop)
          if (before === 'stopped') {
            consumer.nak()
            return
          }
          disputed = before
          const event = webhookEventOf(record, rental)
          if (event !== undefined && (await this.#deliver(rentalId, record.seq, eventIdOf(record.seq), event, stop)) === 'stopped') {
            consumer.nak()
            return
          }
          await consumer.ack(record.seq)
        }
        if (records.length === 0) {
          const through = await this.#deliverDisputes(rentalId, rental, disputed, end, stop)
          if (through === 'stopped') return
          disputed = through
        }
      }
    } finally {
      await consumer.close()
    }
  }

  async #deliverDisputes(rentalId: string, rental: RentalRecord, from: RentalCursor, throughSeq: number, stop: AbortSignal): Promise<RentalCursor | 'stopped'> {
    const deliver = (seq: number, eventId: string, event: Record<string, unknown>) => this.#deliver(rentalId, seq, eventId, event, stop)
    return deliverDisputeEvents(this.#o, rentalId, this.#o.rental(rentalId) ?? rental, from, throughSeq, deliver)
  }

  /** Tries one event until it is delivered, dead-lettered, or the endpoint stops. */
  async #deliver(rentalId: string, seq: number, eventId: string, event: Record<string, unknown>, stop: AbortSignal): Promise<'delivered' | 'dead' | 'stopped'> {
    const { state } = this.#o
    const stored = await state.pending(rentalId)
    const isDispute = eventId !== eventIdOf(seq)
    const same = stored !== null && stored.seq === seq && (stored.event_id ?? eventIdOf(seq)) === eventId
    let pending = same ? stored : { seq, ...(isDispute && { event_id: eventId }), first_attempt_at: this.#now(), attempts: 0, next_at: 0 }
    const webhookId = webhookIdOf(rentalId, eventId)
    const body = JSON.stringify(event)
    for (;;) {
      const wait = pending.next_at - this.#now()
      if (wait > 0) await sleep(wait, stop)
      const endpoint = this.#endpoints.get(rentalId)
      if (stop.aborted || endpoint?.state !== 'enabled' || !this.#owns(rentalId)) return 'stopped'
      const at = this.#now()
      const outcome = await this.#bounded(() => sendWebhook(this.#o, endpoint.url, webhookId, body, at))
      this.#o.onAttempt?.(outcome.result)
      const attempts = pending.attempts + 1
      const base = { webhook_id: webhookId, event_id: eventId, attempt: attempts, attempted_at: new Date(at).toISOString(), result: outcome.result, status: outcome.status, error: outcome.error, duration_ms: outcome.durationMs }
      if (outcome.result === 'delivered') {
        await state.addAttempt(rentalId, { ...base, next_attempt_at: null })
        await state.setPending(rentalId, null)
        await this.#markEndpoint(rentalId, (e) => ({ ...e, last_success_at: base.attempted_at, failing_since: null }))
        return 'delivered'
      }
      const failingSince = endpoint.failing_since === null ? at : Date.parse(endpoint.failing_since)
      const disable = outcome.result === 'gone' ? 'gone' : at - failingSince >= this.#o.disableAfterMs ? 'failing' : null
      if (disable !== null) {
        await state.addAttempt(rentalId, { ...base, next_attempt_at: null })
        await state.setPending(rentalId, { ...pending, attempts })
        await this.#markEndpoint(rentalId, (e) => ({ ...e, state: 'disabled', disabled_reason: disable, disabled_at: base.attempted_at, failing_since: e.failing_since ?? base.attempted_at }))
        return 'stopped'
      }
      if (endpoint.failing_since === null) await this.#markEndpoint(rentalId, (e) => ({ ...e, failing_since: e.failing_since ?? base.attempted_at }))
      if (at - pending.first_attempt_at >= this.#o.retryWindowMs) {
        await state.addAttempt(rentalId, { ...base, next_attempt_at: null })
        await state.addDeadLetter(rentalId, { webhook_id: webhookId, event_id: eventId, seq, dead_at: base.attempted_at, attempts, last_error: outcome.error })
        await state.setPending(rentalId, null)
        this.#o.onDeadLetter?.()
        return 'dead'
      }
      const nextAt = at + retryDelayMs(attempts, this.#o.retryDelaysMs, outcome.retryAfterMs)
      await state.addAttempt(rentalId, { ...base, next_attempt_at: new Date(nextAt).toISOString() })
      pending = { ...pending, attempts, next_at: nextAt }
      await state.setPending(rentalId, pending)
    }
  }

  /** Runs `send` once fewer than maxConcurrent attempts are under way: a slot is held at most the attempt's timeout. */
  async #bounded<T>(send: () => Promise<T>): Promise<T> {
    if (this.#inFlight >= (this.#o.maxConcurrent ?? Infinity)) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    else this.#inFlight++
    try {
      return await send()
    } finally {
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#inFlight--
    }
  }

  async #markEndpoint(rentalId: string, change: (e: WebhookEndpoint) => WebhookEndpoint): Promise<void> {
    const next = await this.#o.state.modifyEndpoint(rentalId, (e) => (e === null ? null : change(e)))
    if (next !== null) this.#endpoints.set(rentalId, next)
  }

  /** Stops every loop (an attempt under way finishes or times out) and the watch. Safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true
    this.#unwatchDisputes?.()
    this.#watch?.stop()
    const loops = [...this.#loops.values()]
    for (const loop of loops) loop.abort.abort()
    await Promise.all(loops.map((l) => l.done))
    await this.#watching
  }
}
