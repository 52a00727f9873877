import type { Dispatcher } from 'undici'
import { request } from 'undici'
import type { SignalLog } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import type { LiveTail } from '../live-tail.js'
import type { RentalDisputes } from '../rental-events.js'
import type { DeliveryKeys } from './delivery-keys.js'
import { parseRetryAfter } from './retry-schedule.js'
import { CatchUpReads } from './catch-up-reads.js'
import type { LoopContext } from './loop-context.js'
import { RentalLoop } from './webhook-loop.js'
import type { DeliveryAttempt, WebhookEndpoint, WebhookState } from './webhook-state.js'
import { WebhookUrlError } from './webhook-url.js'
import { endWebhookSpan, startWebhookSpan } from './webhook-span.js'
import { traceparentOf, tracingOn } from '../../tracing/index.js'
import type { Signer, WebhookSecrets } from './webhook-secrets.js'

export interface WebhookWorkerOptions {
  readonly log: SignalLog
  /** The process's tail of the log: each loop listens to its rental's source. */
  readonly tail: LiveTail
  readonly state: WebhookState
  readonly keys: DeliveryKeys
  /** The secrets of webhooks signed with the `v1` scheme. */
  readonly secrets: WebhookSecrets
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
  /** How often idle loops store the tail's position as theirs (default 60 s). */
  readonly checkpointMs?: number
  /** Attempts under way at once, all rentals together (WEBHOOK_CONCURRENCY). */
  readonly maxConcurrent?: number
  readonly onAttempt?: (result: string) => void
  readonly onDeadLetter?: () => void
  readonly onDelivered?: (latencyMs: number) => void
  readonly onError?: (err: unknown, rentalId: string) => void
  /**
   * An endpoint started failing or was disabled (seen through the watch, so in every
   * process); `owner` is true in the process running the rental's deliveries, which alone counts it.
   */
  readonly onHealth?: (endpoint: WebhookEndpoint, change: 'failing' | 'disabled' | 'healthy', owner: boolean) => void
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
/** The pause before a loop that failed on its storage starts again. */
const LOOP_RESTART_MS = 5_000

/**
 * One POST of an event signed by `sign`; never throws. With tracing on, the attempt is a
 * `webhook.deliver` span and the request carries its `traceparent`, so a receiver that
 * traces continues the trace; with it off, neither.
 */
export async function sendWebhook(options: Pick<WebhookWorkerOptions, 'dispatcher' | 'timeoutMs'>, url: string, webhookId: string, body: string, now: number, sign: Signer): Promise<AttemptOutcome> {
  if (!tracingOn()) return attemptWebhook(options, url, webhookId, body, now, sign, undefined)
  const span = startWebhookSpan(webhookId)
  const outcome = await attemptWebhook(options, url, webhookId, body, now, sign, traceparentOf(span))
  endWebhookSpan(span, outcome)
  return outcome
}

async function attemptWebhook(
  options: Pick<WebhookWorkerOptions, 'dispatcher' | 'timeoutMs'>,
  url: string,
  webhookId: string,
  body: string,
  now: number,
  sign: Signer,
  traceparent: string | undefined,
): Promise<AttemptOutcome> {
  const started = performance.now()
  const timestamp = Math.floor(now / 1000)
  const headers = {
    'content-type': 'application/json',
    'user-agent': 'signal-ingest-gateway-webhooks/1',
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': sign(webhookId, timestamp, body),
    ...(traceparent !== undefined && { traceparent }),
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
    const [result, error] = failureOf(err)
    return { result, status: null, error, retryAfterMs: undefined, durationMs: took() }
  }
}

/** The reasons a renter is told of an attempt that got no HTTP answer. */
export type NoAnswerReason = 'unreachable' | 'timeout' | 'tls_error' | 'refused_address'

const TIMEOUT_CODES: ReadonlySet<string> = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT'])
/**
 * Node's TLS failures: its own codes (ERR_TLS_*, ERR_SSL_*), EPROTO for a handshake the
 * peer broke off, and OpenSSL's certificate verdicts (CERT_HAS_EXPIRED,
 * DEPTH_ZERO_SELF_SIGNED_CERT, UNABLE_TO_VERIFY_LEAF_SIGNATURE...).
 */
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|EPROTO$|UNABLE_TO_)|CERT/

/**
 * A failed attempt as the renter sees it: a result and one coarse reason, never the
 * socket error's text. That text names the address and port tried and how the far side
 * behaved (refused, reset, no route), so a renter pointing its webhook at host after
 * host could map from the operator's network which hosts and ports answer. The
 * address refusal's message names the address a host resolved to, which the operator's
 * resolver may know and the renter must not learn, so it is not passed on either.
 */
function failureOf(err: unknown): [result: string, reason: NoAnswerReason] {
  if (err instanceof WebhookUrlError) return ['refused_address', 'refused_address']
  const e = err as Error & { code?: unknown }
  const code = typeof e.code === 'string' ? e.code : ''
  if (e.name === 'TimeoutError' || TIMEOUT_CODES.has(code)) return ['timeout', 'timeout']
  if (TLS_CODE.test(code)) return ['connection', 'tls_error']
  return ['connection', 'unreachable']
}

/** How often idle loops store how far the tail got, so a restart after a crash has little to read again. */
const CHECKPOINT_MS = 60_000

/**
 * Delivers each rental's events to its webhook: one loop per enabled endpoint
 * (webhook-loop.ts), fed by the process's one tail of the log, which hands each record
 * only to the loops of its source; one event at a time in log order, the rental's
 * position in the state moving past it once delivered or dead-lettered. So a slow or
 * failing receiver holds only its own rental's queue, an idle rental costs no timer and
 * no read, and a restart resumes at the first event past the stored position, with its
 * retry count and window kept in the state.
 */
export class WebhookWorkers {
  readonly #o: WebhookWorkerOptions
  readonly #now: () => number
  readonly #loops = new Map<string, { abort: AbortController; done: Promise<void>; loop: RentalLoop }>()
  readonly #endpoints = new Map<string, WebhookEndpoint>()
  readonly #context: LoopContext
  #watch: ReturnType<WebhookState['watchEndpoints']> | undefined
  #unwatchDisputes: (() => void) | undefined
  #watching: Promise<void> | undefined
  #closed = false
  readonly #sends = new Slots()
  readonly #catchUp: CatchUpReads
  #checkpoints: NodeJS.Timeout | undefined

  constructor(options: WebhookWorkerOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
    const o = options
    this.#catchUp = new CatchUpReads(o.log)
    this.#context = {
      log: o.log,
      state: o.state,
      tail: o.tail,
      now: this.#now,
      retryDelaysMs: o.retryDelaysMs,
      retryWindowMs: o.retryWindowMs,
      disableAfterMs: o.disableAfterMs,
      rental: o.rental,
      disputes: o.disputes,
      owns: (rentalId) => this.#owns(rentalId),
      endpoint: (rentalId) => this.#endpoints.get(rentalId),
      markEndpoint: (rentalId, change) => this.#markEndpoint(rentalId, change),
      send: async (endpoint, webhookId, body, at) => {
        const sign = await o.secrets.signerFor(endpoint, o.keys)
        return this.#sends.run(o.maxConcurrent ?? Infinity, () => sendWebhook(o, endpoint.url, webhookId, body, at, sign))
      },
      catchUp: this.#catchUp,
      onAttempt: (result) => o.onAttempt?.(result),
      onDeadLetter: () => o.onDeadLetter?.(),
      onDelivered: (latencyMs) => o.onDelivered?.(latencyMs),
    }
  }

  /** Follows the endpoints (every process's changes) and runs a loop for each enabled one. */
  async start(): Promise<void> {
    // A dispute accepted while a loop waits wakes it once the tail has handed out the
    // record the dispute is placed after (the loop's records before it come first).
    this.#unwatchDisputes = this.#o.disputes.watchDisputes((changed) => {
      const after = new Map<string, number>()
      for (const d of changed) if (d.state === 'accepted') after.set(d.source_id, Math.max(after.get(d.source_id) ?? 0, d.after_seq ?? 0))
      for (const [sourceId, seq] of after) {
        void this.#o.tail.reached(seq).then(() => {
          for (const [rentalId, { loop }] of this.#loops) if (this.#o.rental(rentalId)?.source_id === sourceId) loop.disputed()
        })
      }
    })
    const watch = this.#o.state.watchEndpoints()
    this.#watch = watch
    this.#watching = (async () => {
      for await (const entry of watch) {
        const rentalId = entry.key.slice('endpoint.'.length)
        const before = this.#endpoints.get(rentalId)
        const after = entry.operation === 'DEL' ? undefined : (JSON.parse(Buffer.from(entry.value).toString('utf8')) as WebhookEndpoint)
        if (after === undefined) this.#endpoints.delete(rentalId)
        else this.#endpoints.set(rentalId, after)
        this.#reconcile(rentalId)
        this.#changed(rentalId, before, after)
      }
    })().catch((err: unknown) => this.#o.onError?.(err, ''))
    await watch.initialized
    this.#checkpoints = setInterval(() => {
      for (const { loop } of this.#loops.values()) loop.checkpoint().catch((err: unknown) => this.#o.onError?.(err, loop.rentalId))
    }, this.#o.checkpointMs ?? CHECKPOINT_MS).unref()
  }

  /** Loops that have done everything handed to them and wait for more. */
  get waiting(): number {
    let n = 0
    for (const { loop } of this.#loops.values()) if (loop.waiting) n++
    return n
  }

  /** Log reads the loops made to catch up. */
  get catchUpReads(): number {
    return this.#catchUp.reads
  }

  /** Loops running now. */
  get running(): number {
    return this.#loops.size
  }

  /** The rentals whose loops run in this process now. */
  runningRentals(): string[] {
    return [...this.#loops.keys()]
  }

  /** Starts and stops loops after the rentals this process owns changed; resolves once the loops it stopped have ended (their runs written). */
  async reconcileAll(): Promise<void> {
    for (const rentalId of this.#endpoints.keys()) this.#reconcile(rentalId)
    const ending = [...this.#loops].filter(([rentalId]) => !this.#owns(rentalId)).map(([, loop]) => (loop.abort.abort(), loop.done))
    await Promise.all(ending)
  }

  #owns(rentalId: string): boolean {
    return this.#o.owns?.(rentalId) ?? true
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

  /** The attempts of the rental's loop in this process not yet written to the state, oldest first. */
  unwrittenAttempts(rentalId: string): DeliveryAttempt[] {
    return this.#loops.get(rentalId)?.loop.unwritten() ?? []
  }

  /** Has the loop look at its re-send list now. */
  poke(rentalId: string): void {
    this.#loops.get(rentalId)?.loop.poke()
  }

  /** The rental changed (its filter, its end): an event waiting for its retry is looked at again. */
  rentalChanged(rentalId: string): void {
    this.#loops.get(rentalId)?.loop.nudge()
  }

  /** Every endpoint as this process last saw it: the figures of /metrics. */
  endpoints(): IterableIterator<WebhookEndpoint> {
    return this.#endpoints.values()
  }

  /**
   * An endpoint changed, here or in another process: its loop looks again at the event it
   * waits to retry (a retry request, a re-send or the URL set again ends the wait; a
   * re-send is in the list it then reads), and the renter is told when the endpoint
   * started failing or was disabled (onHealth, in every process, for its own streams).
   */
  #changed(rentalId: string, before: WebhookEndpoint | undefined, after: WebhookEndpoint | undefined): void {
    const running = this.#loops.get(rentalId)?.loop
    if (running !== undefined && after !== undefined) {
      if ((after.retry_requests ?? 0) !== (before?.retry_requests ?? 0)) running.poke()
      running.nudge()
    }
    // The watch's first values are the state as found, not changes: told only from then on.
    if (before === undefined || after === undefined) return
    const health = healthChange(before, after)
    if (health !== undefined) this.#o.onHealth?.(after, health, this.#owns(rentalId))
  }

  #reconcile(rentalId: string): void {
    if (this.#closed) return
    const endpoint = this.#endpoints.get(rentalId)
    const running = this.#loops.get(rentalId)
    if (endpoint?.state === 'enabled' && this.#owns(rentalId)) {
      if (running === undefined) this.#startLoop(rentalId)
    } else running?.abort.abort()
  }

  #startLoop(rentalId: string): void {
    const abort = new AbortController()
    const loop = new RentalLoop(rentalId, this.#context, abort.signal)
    const entry = { abort, loop, done: Promise.resolve() }
    let failed = false
    entry.done = loop
      .run()
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

  async #markEndpoint(rentalId: string, change: (e: WebhookEndpoint) => WebhookEndpoint): Promise<void> {
    const next = await this.#o.state.modifyEndpoint(rentalId, (e) => (e === null ? null : change(e)))
    if (next !== null) this.#endpoints.set(rentalId, next)
  }

  /** Stops every loop (an attempt under way finishes or times out) and the watch. Safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true
    this.#unwatchDisputes?.()
    clearInterval(this.#checkpoints)
    this.#watch?.stop()
    const loops = [...this.#loops.values()]
    for (const loop of loops) loop.abort.abort()
    await Promise.all(loops.map((l) => l.done))
    await this.#watching
  }
}

/** The change of health from `before` to `after`, if any: failing (no success since a failure), disabled, or healthy again. */
function healthChange(before: WebhookEndpoint, after: WebhookEndpoint): 'failing' | 'disabled' | 'healthy' | undefined {
  const of = (e: WebhookEndpoint) => (e.state === 'disabled' ? 'disabled' : e.failing_since !== null ? 'failing' : 'healthy')
  const from = of(before)
  const to = of(after)
  return from === to ? undefined : to
}

/** A bound on operations under way at once: the next waits for a slot. */
class Slots {
  #inUse = 0
  readonly #waiting: (() => void)[] = []

  async run<T>(max: number, op: () => Promise<T>): Promise<T> {
    if (this.#inUse >= max) await new Promise<void>((resolve) => this.#waiting.push(resolve))
    else this.#inUse++
    try {
      return await op()
    } finally {
      const next = this.#waiting.shift()
      if (next !== undefined) next()
      else this.#inUse--
    }
  }
}
