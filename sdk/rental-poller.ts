import { sleep } from './abortable-sleep.js'
import type { ApiCaller } from './api-call.js'
import { GatewaySdkError, RenterApiError } from './errors.js'
import { RENTAL_ENDED, type RentalEvent } from './renter-api.js'

export interface PollOptions {
  /** Start right after this event; absent: from the rental's start. */
  readonly after?: string
  /** Events per request, 1 to 1,000 (the gateway's default 100 when absent). */
  readonly limit?: number
  /** The wait when nothing follows yet; 2 s by default. */
  readonly intervalMs?: number
  /** Ends the iteration (without an error). */
  readonly signal?: AbortSignal
  /** Consecutive failed requests (no answer, 429, 5xx) before giving up with `poll_unavailable`; 10 by default. */
  readonly maxFailures?: number
}

/**
 * A rental's events by polling, as an async iterable: each page's events in order, the
 * next page from its `next_cursor`, and a wait of `intervalMs` whenever the cursor is null
 * (nothing follows yet). A page with no events can still carry a cursor (the gateway read
 * past other sources' records): it is followed at once. Ends after `byo.rental.ended`.
 * Failures that a retry can change (no answer, 429, 5xx) are retried after a growing wait;
 * any other refusal throws a `RenterApiError`.
 */
export async function* pollRentalEvents(api: ApiCaller, rentalId: string, options: PollOptions = {}): AsyncGenerator<RentalEvent, void, undefined> {
  let after = options.after
  const intervalMs = options.intervalMs ?? 2000
  const maxFailures = options.maxFailures ?? 10
  let failures = 0
  while (!options.signal?.aborted) {
    const query = new URLSearchParams()
    if (after !== undefined) query.set('after', after)
    if (options.limit !== undefined) query.set('limit', String(options.limit))
    let page: { data: unknown; next_cursor?: unknown }
    try {
      page = await api.request('poll events', 'GET', `/v1/rentals/${encodeURIComponent(rentalId)}/signals${query.size > 0 ? `?${query}` : ''}`)
      failures = 0
    } catch (err) {
      if (options.signal?.aborted) return
      if (err instanceof RenterApiError && err.status !== 429 && err.status < 500) throw err
      if (++failures > maxFailures) throw new GatewaySdkError('poll_unavailable', `polling failed ${failures} times in a row; last: ${(err as Error).message}`, { cause: err })
      await sleep(Math.min(30_000, intervalMs * 2 ** (failures - 1)), options.signal)
      continue
    }
    for (const event of page.data as RentalEvent[]) {
      yield event
      if (event.event === RENTAL_ENDED) return
    }
    const next = page.next_cursor as string | null | undefined
    if (next === null || next === undefined || next === after) await sleep(intervalMs, options.signal)
    else after = next
  }
}
