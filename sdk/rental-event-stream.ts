import { sleep } from './abortable-sleep.js'
import { GatewaySdkError, RenterApiError } from './errors.js'
import { RENTAL_ENDED, type RentalEvent } from './renter-api.js'
import { retryAfterMs } from './retry-policy.js'
import { SseParser } from './sse-parser.js'

export interface RentalStreamOptions {
  /** The gateway's base URL, with its path prefix if it has one. */
  readonly gatewayUrl: string
  readonly rentalId: string
  /**
   * How each connection is let in: a single-use stream ticket, asked for anew before every
   * connection (a ticket opens one stream once). `ticket` is called for it; `RenterClient`
   * passes one that asks the gateway with the renter token, and a page passes one that
   * asks its own server (so the renter token never reaches the browser).
   */
  readonly ticket: () => Promise<string>
  /** Resume right after this event; absent: from the rental's start. */
  readonly lastEventId?: string
  /** Ends the stream (the iteration ends without an error). */
  readonly signal?: AbortSignal
  /** Consecutive failed connections (no answer, 429, 5xx) before giving up with `stream_unavailable`; unlimited by default. */
  readonly maxFailures?: number
  /** Called before each reconnection, with why and from where it resumes. */
  readonly onReconnect?: (info: { readonly failures: number; readonly lastEventId: string | undefined; readonly reason: string; readonly delayMs: number }) => void
  readonly fetch?: typeof fetch
}

/** The gateway's own reconnection delay (`retry:` of its streams) until a stream says otherwise. */
const DEFAULT_RETRY_MS = 3000
/** Waits after failures grow to at most this. */
const MAX_RETRY_MS = 30_000

/**
 * A rental's event stream (server-sent events) as an async iterable of events, resumed
 * automatically: when a connection ends without `byo.rental.ended` (a restart, a slow
 * reader cut off, a network failure), a new ticket is asked for and the next connection
 * sends `Last-Event-ID` with the last event received, so nothing is lost or repeated.
 * The iteration ends after `byo.rental.ended`, on a `204` (resumed from the end), or when
 * `signal` fires; a refusal a retry cannot change (400, 401, 403, 404) throws a
 * `RenterApiError`. Reads with fetch, so it runs in Node and in browsers alike.
 */
export async function* rentalEvents(options: RentalStreamOptions): AsyncGenerator<RentalEvent, void, undefined> {
  const doFetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const base = new URL(options.gatewayUrl).href.replace(/\/+$/, '')
  const path = `/v1/rentals/${encodeURIComponent(options.rentalId)}/events`
  let lastEventId = options.lastEventId
  let retryMs = DEFAULT_RETRY_MS
  let failures = 0
  for (;;) {
    if (options.signal?.aborted) return
    let reason: string
    let waitMs: number | undefined
    let res: Response | undefined
    try {
      const ticket = await options.ticket()
      const query = new URLSearchParams({ ticket })
      res = await doFetch(`${base}${path}?${query}`, {
        headers: { accept: 'text/event-stream', ...(lastEventId === undefined ? {} : { 'last-event-id': lastEventId }) },
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      })
    } catch (err) {
      if (options.signal?.aborted) return
      if (err instanceof RenterApiError && !retryable(err.status)) throw err
      reason = err instanceof RenterApiError ? err.message : `no answer: ${(err as Error).message}`
    }
    if (res !== undefined) {
      if (res.status === 204) return
      if (res.status !== 200) {
        const body: unknown = await res.json().catch(() => undefined)
        const refused = new RenterApiError('open event stream', res.status, body)
        if (!retryable(res.status)) throw refused
        reason = refused.message
        waitMs = retryAfterMs(res.headers.get('retry-after'), Date.now())
      } else {
        const parser = new SseParser(lastEventId)
        let received = false
        try {
          for await (const message of textChunks(res)) {
            for (const m of parser.push(message)) {
              const event = parseEvent(m.data)
              if (event === undefined) continue
              lastEventId = m.id ?? event.event_id
              received = true
              yield event
              if (event.event === RENTAL_ENDED) return
            }
            retryMs = parser.retryMs ?? retryMs
          }
          reason = 'the stream ended'
        } catch (err) {
          if (options.signal?.aborted) return
          reason = `the stream broke: ${(err as Error).message}`
        }
        // A connection that carried events was a success: the failure count starts again.
        if (received) failures = 0
      }
    }
    failures++
    if (options.maxFailures !== undefined && failures > options.maxFailures) {
      throw new GatewaySdkError('stream_unavailable', `the event stream could not be read after ${failures} tries; last: ${reason!}`)
    }
    const delayMs = waitMs ?? Math.min(MAX_RETRY_MS, retryMs * 2 ** Math.max(0, failures - 1))
    options.onReconnect?.({ failures, lastEventId, reason: reason!, delayMs })
    await sleep(delayMs, options.signal)
  }
}

/** 429 (too many streams or tickets) and 5xx pass; the other refusals would come again. */
const retryable = (status: number) => status === 429 || status >= 500

function parseEvent(data: string): RentalEvent | undefined {
  try {
    const value = JSON.parse(data) as unknown
    if (typeof value === 'object' && value !== null && typeof (value as RentalEvent).event === 'string') return value as RentalEvent
  } catch {
    // Not an event of this API: skipped, as EventSource would hand it on unparsed.
  }
  return undefined
}

async function* textChunks(res: Response): AsyncGenerator<string> {
  if (res.body === null) return
  const reader = res.body.getReader()
  const decoder = new TextDecoder()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) return
      yield decoder.decode(value, { stream: true })
    }
  } finally {
    await reader.cancel().catch(() => undefined)
  }
}
