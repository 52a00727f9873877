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
import { eventIdOf, webhookEventOf } from './webhook-event.js'
import { WebhookSecrets } from './webhook-secrets.js'
import { WEBHOOK_STATE_LIMITS, webhookBucketLimits as stateLimits, WebhookState, type DeadLetter, type DeliveryAttempt, type WebhookEndpoint, type WebhookScheme } from './webhook-state.js'
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
  /** The `webhook-secrets` bucket (WebhookSecrets.bucketLimits): the `v1` webhooks' HMAC secrets, a secret like the key ring. The caller opens and closes it. */
  readonly secretsBucket: KvBucket
  /** Told of each rental's change (a filter set, an end): a delivery waiting for its retry looks at it again. Returns how to stop. */
  readonly watchRentals?: (listener: (rental: RentalRecord) => void) => () => void
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

/** A webhook's health as its renter is told it (GET /v1/rentals/{rental_id}/webhook). */
export interface WebhookHealth {
  readonly state: 'healthy' | 'failing' | 'disabled'
  /** healthy: the last success (or the endpoint's setting); failing: the first failure since; disabled: when. */
  readonly since: string | null
  /** disabled only: `gone` (the receiver answered 410) or `failing` (no success for the disable time). */
  readonly reason: 'gone' | 'failing' | null
  /** The latest failed attempt, for failing and disabled. */
  readonly last_error: { readonly result: string; readonly status: number | null; readonly error: string | null; readonly attempted_at: string } | null
}

/** Told live on the rental's open streams (no event id: it is not a point of the rental's events, and resuming never repeats it). */
export type WebhookNotice =
  | { readonly event: 'byo.webhook.failing'; readonly rental_id: string; readonly url: string; readonly failing_since: string | null }
  | { readonly event: 'byo.webhook.disabled'; readonly rental_id: string; readonly url: string; readonly disabled_at: string | null; readonly reason: 'gone' | 'failing' | null }

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
  readonly #secrets: WebhookSecrets
  readonly #attempts = new Map<string, number>()
  #deadLetters = 0
  /** Endpoint health changes this process made (it ran the rental's deliveries), by the state reached. */
  readonly #healthChanges = new Map<string, number>()
  readonly #healthListeners = new Set<(notice: WebhookNotice) => void>()
  #unwatchRentals: (() => void) | undefined
  /** The tail this instance started, closed with it. */
  readonly #ownTail: LiveTail | undefined

  private constructor(o: WebhooksOptions, keys: DeliveryKeys, secrets: WebhookSecrets, holderId: string, tail: LiveTail, ownTail: boolean) {
    this.#o = o
    this.#state = new WebhookState(o.bucket)
    this.#keys = keys
    this.#secrets = secrets
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
      secrets,
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
      onHealth: (endpoint, change, owner) => this.#health(endpoint, change, owner),
    })
    if (o.watchRentals !== undefined) this.#unwatchRentals = o.watchRentals((rental) => this.#workers.rentalChanged(rental.rental_id))
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
    let secrets: WebhookSecrets | undefined
    try {
      secrets = await WebhookSecrets.open(o.secretsBucket, (err) => o.onError?.(err, ''))
      const tail = o.tail ?? (await LiveTail.start(o.log, (err) => o.onError?.(err, ''), `webhook-live-${++ownTails}`))
      const webhooks = new Webhooks(o, keys, secrets, o.holderId ?? (await holderIdOf(join(o.dataDir, 'webhook-holder-id'))), tail, o.tail === undefined)
      await webhooks.#workers.start()
      await webhooks.#leases.start()
      return webhooks
    } catch (err) {
      await secrets?.close()
      await keys.close()
      throw err
    }
  }

  #guard() {
    return { allowPrivate: this.#o.allowPrivateNetworks, lookup: this.#o.lookup ?? systemLookup }
  }

  /**
   * Sets (or replaces) the rental's endpoint; a disabled one is enabled again, and an
   * event waiting for its retry is tried at once. `scheme` chooses the signatures: `v1a`
   * (the service's Ed25519 keys), `v1` (a new HMAC secret, returned here once), or, when
   * undefined, the endpoint's current one (`v1a` for a new endpoint). Throws
   * WebhookUrlError for a refused URL.
   */
  async set(rental: RentalRecord, rawUrl: string, scheme?: WebhookScheme): Promise<WebhookEndpoint & { secret?: string }> {
    const url = await checkWebhookUrl(rawUrl, this.#guard())
    const startSeq = (await this.#o.log.info()).lastSeq + 1
    const at = new Date().toISOString()
    // The secret is written before the endpoint names it, so no process looks for it before it exists.
    const made = scheme === 'v1' ? await this.#secrets.create(rental.rental_id) : undefined
    const endpoint = await this.#state.modifyEndpoint(rental.rental_id, (current) => {
      const keeps = scheme === undefined && current?.scheme === 'v1' && current.secret_id !== undefined
      return {
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
        retry_requests: (current?.retry_requests ?? 0) + 1,
        scheme: made !== undefined || keeps ? 'v1' : 'v1a',
        ...(made !== undefined ? { secret_id: made.secretId } : keeps ? { secret_id: current.secret_id } : {}),
      }
    })
    if (endpoint!.scheme === 'v1a') await this.#secrets.remove(rental.rental_id)
    const { secret_id: _named, ...shown } = endpoint!
    return { ...shown, ...(made !== undefined && { secret: made.whsec }) }
  }

  get(rentalId: string): Promise<WebhookEndpoint | null> {
    return this.#state.endpoint(rentalId)
  }

  /**
   * The endpoint with its health as the renter is told it: `healthy`; `failing` since the
   * first failure after the last success, with the last attempt's reason; or `disabled`,
   * with why (`gone`: the receiver answered 410; `failing`: no success for the disable time).
   */
  async view(rentalId: string): Promise<(WebhookEndpoint & { health: WebhookHealth }) | null> {
    const endpoint = await this.#state.endpoint(rentalId)
    if (endpoint === null) return null
    let health: WebhookHealth = { state: 'healthy', since: endpoint.last_success_at ?? endpoint.updated_at, reason: null, last_error: null }
    if (endpoint.state === 'disabled' || endpoint.failing_since !== null) {
      const { attempts } = await this.deliveries(rentalId)
      const failed = attempts.find((a) => a.result !== 'delivered' && a.result !== 'lost')
      const lastError = failed === undefined ? null : { result: failed.result, status: failed.status, error: failed.error, attempted_at: failed.attempted_at }
      health =
        endpoint.state === 'disabled'
          ? { state: 'disabled', since: endpoint.disabled_at, reason: endpoint.disabled_reason, last_error: lastError }
          : { state: 'failing', since: endpoint.failing_since, reason: null, last_error: lastError }
    }
    const { secret_id: _kept, ...shown } = endpoint
    return { ...shown, scheme: endpoint.scheme ?? 'v1a', health }
  }

  /**
   * Ends the wait of the event being retried: it is tried now, by whichever process runs
   * the rental's deliveries (the request is written to the endpoint, which every process
   * follows). A disabled endpoint is enabled again, as setting its URL again does.
   * Returns the event waiting, if any (its id, attempts so far).
   */
  async retry(rental: RentalRecord): Promise<{ endpoint: WebhookEndpoint; pending: { event_id: string; attempts: number } | null }> {
    const endpoint = await this.#state.modifyEndpoint(rental.rental_id, (e) =>
      e === null ? null : { ...e, retry_requests: (e.retry_requests ?? 0) + 1, ...(e.state === 'disabled' && { state: 'enabled', disabled_reason: null, disabled_at: null, failing_since: null }) },
    )
    if (endpoint === null) throw new WebhookRequestError('not_found', 'this rental has no webhook')
    const pending = await this.#state.pending(rental.rental_id)
    return { endpoint, pending: pending === null ? null : { event_id: pending.event_id ?? eventIdOf(pending.seq), attempts: pending.attempts } }
  }

  /** Calls `listener` with each endpoint's change to failing, disabled or healthy, seen by this process (another's writes included). */
  onHealthChange(listener: (notice: WebhookNotice) => void): () => void {
    this.#healthListeners.add(listener)
    return () => this.#healthListeners.delete(listener)
  }

  #health(endpoint: WebhookEndpoint, change: 'failing' | 'disabled' | 'healthy', owner: boolean): void {
    if (owner) this.#healthChanges.set(change, (this.#healthChanges.get(change) ?? 0) + 1)
    if (change === 'healthy') return
    const notice: WebhookNotice =
      change === 'failing'
        ? { event: 'byo.webhook.failing', rental_id: endpoint.rental_id, url: endpoint.url, failing_since: endpoint.failing_since }
        : { event: 'byo.webhook.disabled', rental_id: endpoint.rental_id, url: endpoint.url, disabled_at: endpoint.disabled_at, reason: endpoint.disabled_reason }
    for (const listener of this.#healthListeners) listener(notice)
  }

  /** Endpoints by health as this process sees them (every process follows every endpoint), and the changes this process made. */
  health(): { endpoints: Record<WebhookHealth['state'], number>; changes: ReadonlyMap<string, number> } {
    const endpoints = { healthy: 0, failing: 0, disabled: 0 }
    for (const e of this.#workers.endpoints()) endpoints[e.state === 'disabled' ? 'disabled' : e.failing_since !== null ? 'failing' : 'healthy']++
    return { endpoints, changes: this.#healthChanges }
  }

  /** Stops deliveries and forgets the endpoint, its attempts and its position. False if there was none. */
  async remove(rentalId: string): Promise<boolean> {
    if ((await this.#state.endpoint(rentalId)) === null) return false
    await this.#state.modifyEndpoint(rentalId, () => null)
    await this.#workers.stopped(rentalId)
    await this.#state.removeEndpoint(rentalId)
    await this.#secrets.remove(rentalId)
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
    // Named by the renter: sent whatever its filter says.
    if (record === undefined || record.seq !== seq || endpoint === null || webhookEventOf(record, rental, true) === undefined) {
      throw new WebhookRequestError('not_found', 'no such event for this rental')
    }
    if (!(await this.#state.requestResend(rental.rental_id, [seq!]))) throw new WebhookRequestError('limit_exceeded', `at most ${WEBHOOK_STATE_LIMITS.resendsPerRental} events wait to be re-sent`)
    await this.#askRetry(rental.rental_id)
  }

  /** A re-send ends the wait of the event being retried too, in whichever process runs the rental's deliveries. */
  async #askRetry(rentalId: string): Promise<void> {
    await this.#state.modifyEndpoint(rentalId, (e) => (e === null ? null : { ...e, retry_requests: (e.retry_requests ?? 0) + 1 }))
    this.#workers.poke(rentalId)
  }

  /** Sends again every event of the rental received at or after `since` (ms) that its filter lets through now, up to the log's end now; returns how many. */
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
    await this.#askRetry(rental.rental_id)
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
    const sign = await this.#secrets.signerFor(endpoint, this.#keys)
    const outcome = await sendWebhook({ dispatcher: this.#dispatcher, timeoutMs: this.#o.timeoutMs ?? WEBHOOK_TIMEOUT_MS }, endpoint.url, webhookId, body, at, sign)
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
    this.#unwatchRentals?.()
    await this.#workers.close()
    await this.#leases.close()
    await this.#secrets.close()
    await this.#ownTail?.close()
    await this.#dispatcher.close()
    await this.#keys.close()
  }
}
