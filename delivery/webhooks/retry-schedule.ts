/**
 * When a failed delivery is tried again, counted from the failed attempt: 5 s, 30 s,
 * 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, then every 8 h, each ±20 % at random (jitter, so
 * receivers coming back are not hit by every retry at once). With the default window of
 * 24 hours from the first attempt, the event is tried 12 times over about 31.7 hours
 * (the last attempt starts after the window has passed) and then dead-lettered.
 */
export const RETRY_DELAYS_MS: readonly number[] = [5_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000, 7_200_000, 14_400_000, 28_800_000]

export const JITTER = 0.2

/** The wait after failed attempt number `attempt` (1-based), jittered; `Retry-After` lengthens it, never shortens it. */
export function retryDelayMs(attempt: number, delays: readonly number[], retryAfterMs: number | undefined, random: () => number = Math.random): number {
  const base = delays[Math.min(attempt, delays.length) - 1] ?? 0
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random()))
  return Math.max(jittered, retryAfterMs ?? 0)
}

/** Most Retry-After honoured: a receiver cannot park its queue longer than this per attempt. */
export const MAX_RETRY_AFTER_MS = 8 * 3_600_000

/** A `Retry-After` header (seconds or an HTTP date) in ms, bounded; undefined if absent or unreadable. */
export function parseRetryAfter(value: string | string[] | undefined, now: number): number | undefined {
  const text = Array.isArray(value) ? value[0] : value
  if (text === undefined || text.trim() === '') return undefined
  const ms = /^\d+$/.test(text.trim()) ? Number(text.trim()) * 1000 : Date.parse(text) - now
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), MAX_RETRY_AFTER_MS) : undefined
}
