import { withoutTicket, withTicket, type Holding } from './ticket-holdings.js'
import { TicketStoreFullError, type TicketBounds, type TicketGrant, type TicketStore } from './ticket-store.js'

/**
 * Tickets in this process's memory: a ticket issued by one process would not open a
 * stream on another, so the service uses the KV adapter (ticket-kv.ts); this one serves
 * tests and a single process. Bounded: past `maxTickets` unexpired tickets a new one is
 * refused until some expire or are used, and past the bounds of its rental or its renter
 * (TicketBounds) likewise. The holdings of a rental or a renter list only tickets this
 * store still holds, so their memory is bounded by `maxTickets`.
 */
export class MemoryTicketStore implements TicketStore {
  readonly #tickets = new Map<string, { grant: TicketGrant; expiresAt: number }>()
  readonly #byRental = new Map<string, Holding[]>()
  readonly #byRenter = new Map<string, Holding[]>()
  readonly #maxTickets: number
  readonly #bounds: TicketBounds

  constructor(maxTickets = 100_000, bounds: TicketBounds = { maxPerRental: maxTickets, maxPerRenter: maxTickets }) {
    this.#maxTickets = maxTickets
    this.#bounds = bounds
  }

  get size(): number {
    return this.#tickets.size
  }

  async put(hash: string, grant: TicketGrant, expiresAt: number, now: number): Promise<void> {
    if (this.#tickets.has(hash)) throw new Error('a ticket with this hash exists already')
    // Checked and written with no await between: one process, so nothing can come in between.
    const rental = withTicket(this.#byRental.get(grant.rental_id) ?? [], hash, expiresAt, now, this.#bounds.maxPerRental, 'rental')
    const renter = withTicket(this.#byRenter.get(grant.renter_id) ?? [], hash, expiresAt, now, this.#bounds.maxPerRenter, 'renter')
    if (this.#tickets.size >= this.#maxTickets) this.#sweep(now)
    if (this.#tickets.size >= this.#maxTickets) throw new TicketStoreFullError()
    this.#tickets.set(hash, { grant, expiresAt })
    this.#byRental.set(grant.rental_id, rental)
    this.#byRenter.set(grant.renter_id, renter)
  }

  async peek(hash: string, now: number): Promise<TicketGrant | undefined> {
    const held = this.#tickets.get(hash)
    return held !== undefined && held.expiresAt > now ? held.grant : undefined
  }

  async take(hash: string, now: number): Promise<TicketGrant | undefined> {
    const held = this.#tickets.get(hash)
    if (held === undefined) return undefined
    // Deleted before anything else can run: single use holds even against a second take in flight.
    this.#drop(hash, held.grant, now)
    return held.expiresAt > now ? held.grant : undefined
  }

  async close(): Promise<void> {}

  #drop(hash: string, grant: TicketGrant, now: number): void {
    this.#tickets.delete(hash)
    setOrDelete(this.#byRental, grant.rental_id, withoutTicket(this.#byRental.get(grant.rental_id) ?? [], hash, now))
    setOrDelete(this.#byRenter, grant.renter_id, withoutTicket(this.#byRenter.get(grant.renter_id) ?? [], hash, now))
  }

  #sweep(now: number): void {
    for (const [hash, held] of this.#tickets) if (held.expiresAt <= now) this.#drop(hash, held.grant, now)
  }
}

function setOrDelete(map: Map<string, Holding[]>, owner: string, held: Holding[]): void {
  if (held.length === 0) map.delete(owner)
  else map.set(owner, held)
}
