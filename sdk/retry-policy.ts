/**
 * When a push is sent again, and after how long. Pure functions of the answer and the
 * attempt count, so the schedule can be tested without a clock.
 */

export interface RetryOptions {
  /**
   * Give up once this long has passed since the first send (default 60,000 ms, at most
   * 300,000: the gateway takes a signal only while its `ts` is within 300 s of the
   * attempt's timestamp, so later attempts of the same body could only be refused).
   */
  readonly deadlineMs?: number
  /** One request may take this long before it is abandoned and counted as a network error (default 10,000 ms). */
  readonly attemptTimeoutMs?: number
  /** The first backoff's ceiling (default 250 ms). */
  readonly baseDelayMs?: number
  /** Each backoff's ceiling is the previous one times this (default 2). */
  readonly factor?: number
  /** No backoff ceiling above this (default 30,000 ms). */
  readonly maxDelayMs?: number
}

export type FilledRetryOptions = Required<RetryOptions>

export const DEFAULT_RETRY: FilledRetryOptions = {
  deadlineMs: 60_000,
  attemptTimeoutMs: 10_000,
  baseDelayMs: 250,
  factor: 2,
  maxDelayMs: 30_000,
}

/** The longest deadline: the skew the gateway allows between a signal's ts and the attempt's timestamp. */
export const MAX_DEADLINE_MS = 300_000

export function fillRetryOptions(options: RetryOptions = {}): FilledRetryOptions {
  const filled = { ...DEFAULT_RETRY }
  for (const name of Object.keys(DEFAULT_RETRY) as Array<keyof FilledRetryOptions>) {
    const value = options[name]
    if (value === undefined) continue
    const least = name === 'factor' ? 1 : name === 'attemptTimeoutMs' ? 1 : 0
    const most = name === 'deadlineMs' ? MAX_DEADLINE_MS : Number.MAX_SAFE_INTEGER
    if (typeof value !== 'number' || !Number.isFinite(value) || value < least || value > most) {
      throw new RangeError(`retry option ${name} must be a number from ${least} to ${most}`)
    }
    filled[name] = value
  }
  return filled
}

/**
 * What to do about an answer: a status the gateway may answer differently next time is
 * retried (429: the source's rate; 5xx: overload, start-up, a failed write), any other is
 * final. 400 (a bad body), 401 (a bad signature, key or clock), 403, 404, 409 (a signal_id
 * reused with another body) and 413 would be refused again.
 */
export const isRetryableStatus = (status: number): boolean => status === 429 || (status >= 500 && status <= 599)

/**
 * The wait `Retry-After` asks for, in ms: delay-seconds or an HTTP-date (RFC 9110
 * section 10.2.3), never negative; undefined when absent or unreadable.
 */
export function retryAfterMs(header: string | null, nowMs: number): number | undefined {
  if (header === null) return undefined
  const value = header.trim()
  if (/^[0-9]{1,9}$/.test(value)) return Number(value) * 1000
  if (!/[A-Za-z]/.test(value)) return undefined
  const at = Date.parse(value)
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs)
}

/**
 * Exponential backoff with full jitter: a uniform wait in [0, min(maxDelay, base * factor^n)),
 * where n counts the retries before this one (0 for the first). Clients that failed
 * together spread out instead of returning together.
 */
export function backoffMs(retriesBefore: number, o: FilledRetryOptions, random: () => number = Math.random): number {
  const ceiling = Math.min(o.maxDelayMs, o.baseDelayMs * o.factor ** retriesBefore)
  return Math.floor(random() * ceiling)
}

/**
 * The wait before the next attempt. 429 and 503 with a readable `Retry-After` wait what it
 * says plus up to a tenth more (at most one second), so sources shed in the same instant do
 * not all come back in the same instant; anything else retryable backs off.
 */
export function nextDelayMs(
  answer: { readonly status: number | undefined; readonly retryAfter: string | null },
  retriesBefore: number,
  o: FilledRetryOptions,
  nowMs: number,
  random: () => number = Math.random,
): number {
  if (answer.status === 429 || answer.status === 503) {
    const asked = retryAfterMs(answer.retryAfter, nowMs)
    if (asked !== undefined) return asked + Math.floor(random() * Math.min(1000, asked / 10))
  }
  return backoffMs(retriesBefore, o, random)
}
