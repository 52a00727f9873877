import { TicketLimitError, type TicketLimitScope } from './ticket-store.js'

/** One ticket held against a rental's or a renter's bound: its hash and its expiry (ms). */
export type Holding = readonly [hash: string, expiresAt: number]

/** The holdings still outstanding at `now`: an expired ticket frees its place whether or not it was ever spent or deleted. */
export function outstanding(held: readonly Holding[], now: number): Holding[] {
  return held.filter((h) => h[1] > now)
}

/**
 * The outstanding holdings with the ticket `hash` added, or TicketLimitError when `max`
 * are outstanding already; its Retry-After is the wait until the first of them expires.
 */
export function withTicket(held: readonly Holding[], hash: string, expiresAt: number, now: number, max: number, scope: TicketLimitScope): Holding[] {
  const live = outstanding(held, now)
  if (live.length >= max) throw new TicketLimitError(scope, Math.max(0, Math.min(...live.map((h) => h[1])) - now))
  return [...live, [hash, expiresAt]]
}

/** The outstanding holdings without the ticket `hash`. */
export function withoutTicket(held: readonly Holding[], hash: string, now: number): Holding[] {
  return outstanding(held, now).filter((h) => h[0] !== hash)
}
