import { TicketStoreFullError, type TicketGrant, type TicketStore } from './ticket-store.js'

/**
 * Tickets in this process's memory: a ticket issued by one process would not open a
 * stream on another, so the service uses the KV adapter (ticket-kv.ts); this one serves
 * tests and a single process. Bounded: past `maxTickets` unexpired
 * tickets a new one is refused until some expire or are used.
 */
export class MemoryTicketStore implements TicketStore {
  readonly #tickets = new Map<string, { grant: TicketGrant; expiresAt: number }>()
  readonly #maxTickets: number

  constructor(maxTickets = 100_000) {
    this.#maxTickets = maxTickets
  }

  get size(): number {
    return this.#tickets.size
  }

  async put(hash: string, grant: TicketGrant, expiresAt: number): Promise<void> {
    if (this.#tickets.size >= this.#maxTickets) this.#sweep(Date.now())
    if (this.#tickets.size >= this.#maxTickets) throw new TicketStoreFullError()
    if (this.#tickets.has(hash)) throw new Error('a ticket with this hash exists already')
    this.#tickets.set(hash, { grant, expiresAt })
  }

  async peek(hash: string, now: number): Promise<TicketGrant | undefined> {
    const held = this.#tickets.get(hash)
    return held !== undefined && held.expiresAt > now ? held.grant : undefined
  }

  async take(hash: string, now: number): Promise<TicketGrant | undefined> {
    const held = this.#tickets.get(hash)
    if (held === undefined) return undefined
    // Deleted before anything else can run: single use holds even against a second take in flight.
    this.#tickets.delete(hash)
    return held.expiresAt > now ? held.grant : undefined
  }

  async close(): Promise<void> {}

  #sweep(now: number): void {
    for (const [hash, held] of this.#tickets) if (held.expiresAt <= now) this.#tickets.delete(hash)
  }
}
