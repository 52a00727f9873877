/** What a stream ticket lets its bearer open: one rental's stream, as its renter. */
export interface TicketGrant {
  readonly rental_id: string
  readonly renter_id: string
  /**
   * The renter token the ticket was issued to: once that token is revoked the ticket opens
   * nothing. Absent only in tickets stored before it was recorded, which open nothing either.
   */
  readonly token_id?: string
}

/**
 * Stream tickets: short-lived, single-use credentials for `?ticket=`, since a browser's
 * EventSource cannot send an Authorization header. Stored by the SHA-256 of the ticket,
 * never the ticket itself. Asynchronous, with what a NATS KV bucket offers (create-if-absent
 * to store, delete with the expected revision to redeem once), so that a cluster can share
 * tickets across processes: the KV adapter (ticket-kv.ts) is what the service uses; the
 * in-memory adapter (ticket-memory.ts) serves a single process, and tests.
 */
export interface TicketStore {
  /**
   * Stores a grant under `hash` until `expiresAt` (ms), if its rental and its renter each
   * hold fewer unspent, unexpired tickets at `now` than the store's bounds
   * (TicketBounds): TicketLimitError otherwise, so that one renter cannot take every
   * place. Past the store's bound of all tickets together: TicketStoreFullError.
   */
  put(hash: string, grant: TicketGrant, expiresAt: number, now: number): Promise<void>
  /**
   * The grant under `hash` without taking it (undefined when unknown or expired), so that a
   * request is checked in full before its ticket is spent.
   */
  peek(hash: string, now: number): Promise<TicketGrant | undefined>
  /** Takes the grant under `hash` out, once: a second take, or one after expiry, gets undefined. */
  take(hash: string, now: number): Promise<TicketGrant | undefined>
  /** Stops its background work (a KV adapter's watch and sweep); the tickets stay in the store. */
  close(): Promise<void>
}

/**
 * Outstanding tickets (issued, not spent, not expired) one rental, and one renter over all
 * its rentals, may hold at once. Exact, also across processes sharing a store: a renter
 * issuing tickets as fast as it can fills its own places and nobody else's.
 */
export interface TicketBounds {
  readonly maxPerRental: number
  readonly maxPerRenter: number
}

/** Which bound a refused ticket met. */
export type TicketLimitScope = 'rental' | 'renter'

/**
 * A new ticket past its rental's or its renter's bound: the route answers 429 rate_limited,
 * with Retry-After from `retryAfterMs` (until the oldest ticket held against that bound
 * expires and frees its place).
 */
export class TicketLimitError extends Error {
  readonly code = 'tickets_limited'
  constructor(
    readonly scope: TicketLimitScope,
    readonly retryAfterMs: number,
  ) {
    super(`the ${scope} has the most stream tickets outstanding at once`)
    this.name = 'TicketLimitError'
  }
}

/** A new ticket past the store's bound: the route answers 503 overloaded with Retry-After. */
export class TicketStoreFullError extends Error {
  readonly code = 'tickets_full'
  constructor() {
    super('too many stream tickets are outstanding')
    this.name = 'TicketStoreFullError'
  }
}
