import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { Agent } from 'undici'
import type { SignalLog } from '../../pipeline/index.js'
import type { RentalDisputes } from '../rental-events.js'
import { effectiveRental, isFinal, type RentalRecord } from '../../rentals/index.js'
import type { KvBucket, KvBucketLimits } from '../../storage/index.js'
import { LiveTail } from '../live-tail.js'
import type { LatencyObserver } from '../stream-session.js'
import { DeliveryKeys, type PublishedDeliveryKey } from './delivery-keys.js'
import { guardedConnector } from './guarded-connector.js'
import { RETRY_DELAYS_MS } from './retry-schedule.js'
import { webhookEventOf } from './webhook-event.js'
import { WEBHOOK_STATE_LIMITS, webhookBucketLimits as stateLimits, WebhookState, type DeadLetter, type DeliveryAttempt, type WebhookEndpoint } from './webhook-state.js'
import { checkWebhookUrl, systemLookup, type HostLookup } from './webhook-url.js'
import { sendWebhook, WebhookWorkers, type AttemptOutcome } from './webhook-worker.js'
import { holderIdOf, LEASE_KEYS, ShardLeases } from './shard-lease.js'

/** A delivery attempt's time limit, connection to answer. */
export const WEBHOOK_TIMEOUT_MS = 10_000

export interface WebhooksOptions {
  readonly dataDir: string
  readonly bucket: KvBucket
  /**
   * The `delivery-keys` bucket (DeliveryKeys.bucketLimits), shared by every delivery
   * process so they sign with one ring; it holds the private keys. The caller opens and closes it.
   */
  readonly keysBucket: KvBucket
  readonly log: SignalLog
  /** The process's tail of the log (the streams'); without it the webhooks start a tail of their own. */
  readonly tail?: LiveTail
  readonly rental: (rentalId: string) => RentalRecord | undefined
  /** The accepted disputes, delivered in their place among the records (the registry). */
  readonly disputes: RentalDisputes
  readonly allowPrivateNetworks: boolean
  readonly retryWindowMs: number
  /** The first retry delay; the schedule keeps its shape (RETRY_DELAYS_MS at 5 s). */
  readonly retryFirstMs: number
  readonly disableAfterMs: number
  readonly maxConnections: number
  readonly keyOverlapMs: number
  /** Test requests a rental may make in any minute (WEBHOOK_TESTS_PER_MINUTE). */
  readonly testsPerMinute: number
  /** How long a process's lease on a shard of rentals lasts without a renewal (WEBHOOK_LEASE_MS). */
  readonly leaseMs: number
  /** This process's name on the leases; by default DATA_DIR/webhook-holder-id, kept across restarts. */
  readonly holderId?: string
  readonly lookup?: HostLookup
  readonly timeoutMs?: number
  readonly onAttempt?: (result: string) => void
  readonly onDeadLetter?: () => void
  /** Told each signal's first delivery: the milliseconds from the log storing it to the receiver's 2xx (a histogram of /metrics). */
  readonly latency?: LatencyObserver
  readonly onError?: (err: unknown, rentalId: string) => void
  /** Something went on after a repair or without a change (the delivery key ring's watch restarted, an old key file set aside). */
  readonly onWarning?: (message: string, err?: unknown) => void
}

/** The `webhooks` bucket's bounds: the delivery state of `maxRentals` rentals and the lease keys. */
export function webhookBucketLimits(maxRentals: number): KvBucketLimits {
  const limits = stateLimits(maxRentals)
  return { ...limits, maxKeys: limits.maxKeys + LEASE_KEYS }
}

/** Tails started by instances without one given, numbered so each has its own log consumer in the process. */
let ownTails = 0

/** Refusals the routes turn into API errors; `retryAfterS` goes out as Retry-After. */
export class WebhookRequestError extends Error {
  constructor(
    readonly code: 'not_found' | 'limit_exceeded' | 'rate_limited' | 'rental_not_active',
    message: string,
    readonly retryAfterS?: number,
  ) {
    super(message)
    this.name = 'WebhookRequestError'
  }
}

/**
 * Webhooks as the API sees them: endpoints set, read and removed by the renter, the
 * delivery log, re-sends and test requests, and the delivery keys. The workers run in
 * the same process and follow the endpoints through the store's watch.
 */
export class Webhooks {
  readonly #o: WebhooksOptions
  readonly #state: WebhookState
  readonly #keys: DeliveryKeys
  readonly #dispatcher: Agent
  readonly #workers: WebhookWorkers
  readonly #leases: ShardLeases
  readonly #attempts = new Map<string, number>()
  #deadLetters = 0
  /** The tail this instance started, closed with it. */
  readonly #ownTail: LiveTail | undefined

  private constructor(o: WebhooksOptions, keys: DeliveryKeys, holderId: string, tail: LiveTail, ownTail: boolean) {
    this.#o = o
    this.#state = new WebhookState(o.bucket)
    this.#keys = keys
    const timeoutMs = o.timeoutMs ?? WEBHOOK_TIMEOUT_MS
    // One connection per receiver at a time (deliveries of a rental go one by one), and a bound on all of them.
    this.#dispatcher = new Agent({
      connect: guardedConnector({ allowPrivate: o.allowPrivateNetworks, lookup: o.lookup ?? systemLookup, timeoutMs }),
      connections: 1,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
    const scale = o.retryFirstMs / RETRY_DELAYS_MS[0]!
    this.#ownTail = ownTail ? tail : undefined
    this.#workers = new WebhookWorkers({
      log: o.log,
      tail,
      state: this.#state,
      keys,
      rental: o.rental,
      disputes: o.disputes,
      dispatcher: this.#dispatcher,
      timeoutMs,
      retryDelaysMs: RETRY_DELAYS_MS.map((d) => Math.round(d * scale)),
      retryWindowMs: o.retryWindowMs,
      disableAfterMs: o.disableAfterMs,
      maxConcurrent: o.maxConnections,
      onAttempt: (result) => {
        this.#attempts.set(result, (this.#attempts.get(result) ?? 0) + 1)
        o.onAttempt?.(result)
      },
      onDeadLetter: () => {
        this.#deadLetters++
        o.onDeadLetter?.()
      },
      ...(o.latency && { onDelivered: (ms: number) => o.latency!.observeMs(ms) }),
      ...(o.onError && { onError: o.onError }),
      owns: (rentalId) => this.#leases.owns(rentalId),
    })
    // Each rental's loop runs only in the process holding its shard's lease.
    this.#leases = new ShardLeases({
      bucket: o.bucket,
      holderId,
      leaseMs: o.leaseMs,
      onChange: () => this.#workers.reconcileAll(),
      onError: (err) => o.onError?.(err, ''),
    })
  }

  static async open(o: WebhooksOptions): Promise<Webhooks> {
    const keys = await DeliveryKeys.open({ bucket: o.keysBucket, legacyFile: join(o.dataDir, 'delivery-keys.json'), ...(o.onWarning && { onWarning: o.onWarning }) })
    try {
      const tail = o.tail ?? (await LiveTail.start(o.log, (err) => o.onError?.(err, ''), `webhook-live-${++ownTails}`))
      const webhooks = new Webhooks(o, keys, o.holderId ?? (await holderIdOf(join(o.dataDir, 'webhook-holder-id'))), tail, o.tail === undefined)
      await webhooks.#workers.start()
      await webhooks.#leases.start()
      return webhooks
    } catch (err) {
      await keys.close()
      throw err
    }
  }

  #guard() {
    return { allowPrivate: this.#o.allowPrivateNetworks, lookup: this.#o.lookup ?? systemLookup }
  }

  /** Sets (or replaces) the rental's endpoint; a disabled one is enabled again. Throws WebhookUrlError for a refused URL. */
  async set(rental: RentalRecord, rawUrl: string): Promise<WebhookEndpoint> {
    const url = await checkWebhookUrl(rawUrl, this.#guard())
    const startSeq = (await this.#o.log.info()).lastSeq + 1
    const at = new Date().toISOString()
    const endpoint = await this.#state.modifyEndpoint(rental.rental_id, (current) => ({
      rental_id: rental.rental_id,
      url,
      start_seq: current?.start_seq ?? startSeq,
      created_at: current?.created_at ?? at,
      updated_at: at,
      state: 'enabled',
      disabled_reason: null,
      disabled_at: null,
      last_success_at: current?.last_success_at ?? null,
      failing_since: null,
    }))
    return endpoint!
  }

  get(rentalId: string): Promise<WebhookEndpoint | null> {
    return this.#state.endpoint(rentalId)
  }

  /** Stops deliveries and forgets the endpoint, its attempts and its position. False if there was none. */
  async remove(rentalId: string): Promise<boolean> {
    if ((await this.#state.endpoint(rentalId)) === null) return false
    await this.#state.modifyEndpoint(rentalId, () => null)
    await this.#workers.stopped(rentalId)
    await this.#state.removeEndpoint(rentalId)
    await this.#state.forgetTestPlaces(rentalId, Date.now())
    await this.#o.log.deleteConsumer(`webhook-${rentalId}`).catch(() => false)
    return true
  }

  async deliveries(rentalId: string): Promise<{ attempts: DeliveryAttempt[]; dead_letters: DeadLetter[] }> {
    // Attempts are written per run of events; this process's not yet written ones are shown too.
    const unwritten = this.#workers.unwrittenAttempts(rentalId).reverse()
    const stored = await this.#state.attempts(rentalId)
    const key = (a: DeliveryAttempt) => `${a.webhook_id} ${a.attempt} ${a.attempted_at}`
    const shown = new Set(unwritten.map(key))
    const attempts = [...unwritten, ...stored.filter((a) => !shown.has(key(a)))].slice(0, WEBHOOK_STATE_LIMITS.attemptsPerRental)
    return { attempts, dead_letters: await this.#state.deadLetters(rentalId) }
  }

  /** Sends one event again (same webhook-id); WebhookRequestError `not_found` if the rental never received it or the log no longer holds it. */
  async resend(rental: RentalRecord, eventId: string): Promise<void> {
    const seq = /^[1-9]\d{0,15}$/.test(eventId) ? Number(eventId) : undefined
    const [record] = seq === undefined ? [] : await this.#o.log.read({ fromSeq: seq }, 1)
    const endpoint = await this.#state.endpoint(rental.rental_id)
    if (record === undefined || record.seq !== seq || endpoint === null || webhookEventOf(record, rental) === undefined) {
      throw new WebhookRequestError('not_found', 'no such event for this rental')
    }
    if (!(await this.#state.requestResend(rental.rental_id, [seq!]))) throw new WebhookRequestError('limit_exceeded', `at most ${WEBHOOK_STATE_LIMITS.resendsPerRental} events wait to be re-sent`)
    this.#workers.poke(rental.rental_id)
  }

  /** Sends again every event of the rental received at or after `since` (ms), up to the log's end now; returns how many. */
  async resendSince(rental: RentalRecord, since: number): Promise<number> {
    // Queued without an endpoint, they would go to whichever webhook is set next: one set later starts at the signals accepted from then on.
    if ((await this.#state.endpoint(rental.rental_id)) === null) throw new WebhookRequestError('not_found', 'this rental has no webhook set')
    const { lastSeq } = await this.#o.log.info()
    const seqs: number[] = []
    for (let batch = await this.#o.log.read({ fromTime: since }, 4096); batch.length > 0; ) {
      for (const record of batch) {
        if (record.seq > lastSeq) break
        if (webhookEventOf(record, rental) !== undefined) seqs.push(record.seq)
        if (seqs.length > WEBHOOK_STATE_LIMITS.resendsPerRental) throw new WebhookRequestError('limit_exceeded', `at most ${WEBHOOK_STATE_LIMITS.resendsPerRental} events can be re-sent at once; choose a later time`)
      }
      const last = batch[batch.length - 1]!.seq
      batch = last >= lastSeq ? [] : await this.#o.log.read({ fromSeq: last + 1 }, 4096)
    }
    if (seqs.length > 0 && !(await this.#state.requestResend(rental.rental_id, seqs))) throw new WebhookRequestError('limit_exceeded', `at most ${WEBHOOK_STATE_LIMITS.resendsPerRental} events wait to be re-sent`)
    this.#workers.poke(rental.rental_id)
    return seqs.length
  }

  /**
   * Sends a signed `byo.webhook.test` event to the endpoint now and tells what came back.
   * Each one makes the gateway connect where the renter says, so it is bounded like a
   * delivery is: only until the rental ends or expires (after that it delivers nothing,
   * so there is nothing left to test), and at most `testsPerMinute` a minute per rental.
   */
  async test(rental: RentalRecord): Promise<AttemptOutcome & { webhook_id: string }> {
    const at = Date.now()
    if (isFinal(effectiveRental(rental, at))) throw new WebhookRequestError('rental_not_active', 'the rental has ended or expired; its webhook can no longer be tested')
    const endpoint = await this.#state.endpoint(rental.rental_id)
    if (endpoint === null) throw new WebhookRequestError('not_found', 'this rental has no webhook')
    const waitMs = await this.#state.takeTestPlace(rental.rental_id, this.#o.testsPerMinute, at)
    if (waitMs > 0) {
      const seconds = Math.ceil(waitMs / 1000)
      throw new WebhookRequestError('rate_limited', `at most ${this.#o.testsPerMinute} test requests a minute per rental; retry in ${seconds} s`, seconds)
    }
    const webhookId = `msg_test_${randomBytes(12).toString('hex')}`
    const body = JSON.stringify({ event: 'byo.webhook.test', event_id: webhookId, rental_id: rental.rental_id, source_id: rental.source_id, sent_at: new Date(at).toISOString() })
    const outcome = await sendWebhook({ dispatcher: this.#dispatcher, keys: this.#keys, timeoutMs: this.#o.timeoutMs ?? WEBHOOK_TIMEOUT_MS }, endpoint.url, webhookId, body, at)
    return { ...outcome, webhook_id: webhookId }
  }

  /** Attempts by result and dead letters since the start, for the metrics. */
  counts(): { attempts: ReadonlyMap<string, number>; deadLetters: number } {
    return { attempts: this.#attempts, deadLetters: this.#deadLetters }
  }

  deliveryKeys(): PublishedDeliveryKey[] {
    return this.#keys.published()
  }

  rotateDeliveryKeys(): Promise<PublishedDeliveryKey[]> {
    return this.#keys.rotate(this.#o.keyOverlapMs)
  }

  /** This process's holder id, the lease shards it holds, the rentals whose loops it runs, and the lease writes it made. */
  ownership(): { holder: string; shards: number[]; running: string[]; leaseWrites: number } {
    return { holder: this.#leases.holderId, shards: this.#leases.held(), running: this.#workers.runningRentals(), leaseWrites: this.#leases.writes() }
  }

  async close(): Promise<void> {
    // Loops end first (an attempt under way finishes), then the leases are released for another process.
    await this.#workers.close()
    await this.#leases.close()
    await this.#ownTail?.close()
    await this.#dispatcher.close()
    await this.#keys.close()
  }
}
