import { sleep } from './abortable-sleep.js'
import { utf8Bytes } from './bytes.js'
import type { Ed25519Signer } from './ed25519-signer.js'
import { errorOf, PushError, type PushFailure } from './errors.js'
import { signRequest } from './request-signing.js'
import { responseText } from './response-text.js'
import { fillRetryOptions, isRetryableStatus, nextDelayMs, type RetryOptions } from './retry-policy.js'

/** An ingest answer is under 1 kB; more is not the gateway. */
const MAX_ANSWER_BYTES = 64 * 1024

/** The gateway's 202 body. */
export interface AcceptedSignal {
  readonly ok: true
  readonly signal_id: string
  readonly source_id: string
  readonly status: 'accepted'
  /** Arrival time (ISO 8601 UTC); for a deduplicated answer, the first arrival's. */
  readonly received_at: string
  /** Present when a pending key's test signal was accepted (the key may now be promoted). */
  readonly test?: true
  /** Present when this signal had been accepted before: an earlier attempt got through. */
  readonly deduplicated?: true
  /** Present when an accepted dispute moved the stored signal to state disputed. */
  readonly disputed?: true
}

export interface SourceClientOptions {
  /** The gateway's base URL, `https://gateway.example.com`, with its path prefix if it has one. */
  readonly gatewayUrl: string
  readonly sourceId: string
  /** The key's id, from its registration. */
  readonly keyId: string
  /** From `loadCreatorKey`. */
  readonly key: Ed25519Signer
  /** Defaults for every push of this client (see `RetryOptions`). */
  readonly retry?: RetryOptions
  /** A fetch to use instead of the global one. */
  readonly fetch?: typeof fetch
}

/** One retry about to happen, for logs and metrics. */
export interface RetryEvent {
  /** The attempt that failed, from 1. */
  readonly attempt: number
  readonly status: number | undefined
  readonly errorCode: string | undefined
  /** The network error or timeout, when no answer came. */
  readonly error: unknown
  /** How long the client waits before the next attempt. */
  readonly delayMs: number
}

export interface PushOptions extends RetryOptions {
  /** Stops the push (and any wait) at once; it ends with a `PushError` coded `push_aborted`. */
  readonly signal?: AbortSignal
  readonly onRetry?: (event: RetryEvent) => void
}

type Attempt =
  | { readonly kind: 'answer'; readonly status: number; readonly body: unknown; readonly retryAfter: string | null }
  | { readonly kind: 'failed'; readonly error: unknown }

/**
 * Pushes one source's signals with one key. Each push serialises the signal once and sends
 * those bytes on every attempt, each signed anew with a fresh nonce and timestamp, with
 * `Idempotency-Key` set to the signal_id: when an attempt got through but its answer was
 * lost, the next one is answered `202` with `deduplicated: true`, never stored twice.
 */
export class SourceClient {
  readonly sourceId: string
  readonly keyId: string
  readonly #origin: string
  readonly #pathPrefix: string
  readonly #key: Ed25519Signer
  readonly #retry: RetryOptions
  readonly #fetch: typeof fetch

  constructor(options: SourceClientOptions) {
    const url = new URL(options.gatewayUrl)
    this.#origin = url.origin
    this.#pathPrefix = url.pathname.replace(/\/+$/, '')
    this.sourceId = options.sourceId
    this.keyId = options.keyId
    this.#key = options.key
    this.#retry = options.retry ?? {}
    // Bound: a browser's fetch called as a method of another object throws "Illegal invocation".
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
    fillRetryOptions(this.#retry)
  }

  /**
   * Sends `signal` (its `source_id` is filled in when absent) until the gateway accepts
   * it, refuses it for good, or the deadline passes. Resolves with the 202 body; rejects
   * with a `PushError` saying which, with the last answer and the number of attempts.
   */
  async push(signal: Readonly<Record<string, unknown>>, options: PushOptions = {}): Promise<AcceptedSignal> {
    const body = utf8Bytes(JSON.stringify(signal.source_id === undefined ? { ...signal, source_id: this.sourceId } : signal))
    const signalId = signal.signal_id
    return this.pushBody(body, { ...options, ...(typeof signalId === 'string' ? { idempotencyKey: signalId } : {}) })
  }

  /** `push` for a body already serialised: these exact bytes are signed and sent. */
  async pushBody(body: Uint8Array, options: PushOptions & { readonly idempotencyKey?: string } = {}): Promise<AcceptedSignal> {
    const o = fillRetryOptions({ ...this.#retry, ...definedRetryOptions(options) })
    const started = Date.now()
    const deadline = started + o.deadlineMs
    let attempts = 0
    let last: Attempt | undefined
    const fail = (code: PushFailure): PushError => {
      const answer = last?.kind === 'answer' ? last : undefined
      const error = errorOf(answer?.body)
      return new PushError(
        code,
        { status: answer?.status, errorCode: error.code, errorMessage: error.message, requestId: error.requestId, attempts, elapsedMs: Date.now() - started },
        last?.kind === 'failed' ? last.error : undefined,
      )
    }
    for (;;) {
      if (options.signal?.aborted) throw fail('push_aborted')
      const remaining = deadline - Date.now()
      if (remaining <= 0) throw fail('push_deadline_exceeded')
      attempts++
      const signed = await signRequest({
        sourceId: this.sourceId,
        keyId: this.keyId,
        key: this.#key,
        body,
        pathPrefix: this.#pathPrefix,
        ...(options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey }),
      })
      last = await this.#send(signed.path, signed.headers, signed.body, Math.min(o.attemptTimeoutMs, remaining), options.signal)
      if (options.signal?.aborted) throw fail('push_aborted')
      if (last.kind === 'answer') {
        if (last.status === 202 && isAccepted(last.body)) return last.body
        if (last.status !== 202 && !isRetryableStatus(last.status)) throw fail('push_refused')
      }
      const answer = last.kind === 'answer' ? { status: last.status, retryAfter: last.retryAfter } : { status: undefined, retryAfter: null }
      const delayMs = nextDelayMs(answer, attempts - 1, o, Date.now())
      if (Date.now() + delayMs >= deadline) throw fail('push_deadline_exceeded')
      options.onRetry?.({
        attempt: attempts,
        status: answer.status,
        errorCode: last.kind === 'answer' ? errorOf(last.body).code : undefined,
        error: last.kind === 'failed' ? last.error : undefined,
        delayMs,
      })
      await sleep(delayMs, options.signal)
    }
  }

  /** One request; a network error, a timeout or an unreadable (or oversized) body is a `failed` attempt. */
  async #send(path: string, headers: Readonly<Record<string, string>>, body: Uint8Array, timeoutMs: number, signal: AbortSignal | undefined): Promise<Attempt> {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new TimeoutError(timeoutMs)), timeoutMs)
    const onAbort = () => controller.abort(signal?.reason)
    signal?.addEventListener('abort', onAbort, { once: true })
    try {
      const res = await this.#fetch(this.#origin + path, {
        method: 'POST',
        headers,
        body: body as Uint8Array<ArrayBuffer>,
        // A redirect would resend a signed POST to a path it was not signed for.
        redirect: 'manual',
        signal: controller.signal,
      })
      const text = await responseText(res, MAX_ANSWER_BYTES)
      let parsed: unknown
      try {
        parsed = text === '' ? undefined : JSON.parse(text)
      } catch {
        // A 202 that cannot be read is treated as lost: the retry gets the deduplicated 202.
        if (res.status === 202) return { kind: 'failed', error: new Error('the 202 answer was not JSON') }
      }
      return { kind: 'answer', status: res.status, body: parsed, retryAfter: res.headers.get('retry-after') }
    } catch (error) {
      return { kind: 'failed', error: controller.signal.reason instanceof TimeoutError ? controller.signal.reason : error }
    } finally {
      clearTimeout(timer)
      signal?.removeEventListener('abort', onAbort)
    }
  }
}

/** The per-attempt time limit passed. */
export class TimeoutError extends Error {
  constructor(ms: number) {
    super(`no answer within ${ms} ms`)
    this.name = 'TimeoutError'
  }
}

function isAccepted(body: unknown): body is AcceptedSignal {
  return typeof body === 'object' && body !== null && (body as { ok?: unknown }).ok === true && typeof (body as { signal_id?: unknown }).signal_id === 'string'
}

/** Only the retry options that were given, so undefined does not override a client default. */
function definedRetryOptions(options: RetryOptions): RetryOptions {
  const out: Record<string, number> = {}
  for (const name of ['deadlineMs', 'attemptTimeoutMs', 'baseDelayMs', 'factor', 'maxDelayMs'] as const) {
    const value = options[name]
    if (value !== undefined) out[name] = value
  }
  return out
}
