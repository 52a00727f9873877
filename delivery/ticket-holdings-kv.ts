import { createHash } from 'node:crypto'
import { isRevisionRace, writeOverRead, type KvBucket, type KvBucketLimits, type KvEntry } from '../storage/index.js'
import { withoutTicket, withTicket, type Holding } from './ticket-holdings.js'
import { TicketLimitError, type TicketBounds, type TicketLimitScope } from './ticket-store.js'

/** Bytes of one holding in a record, `["<64 hex>",<13 digits>],`, with room to spare. */
const HOLDING_BYTES = 90
/** Bytes of a record around its holdings. */
const RECORD_BYTES = 64
/**
 * Reads and writes at an expected revision one claim or release makes before it gives up.
 * Each lost round means another write of the same record won, so only a burst on one
 * rental or renter, its own, exhausts them; a claim then counts as refused by the bound.
 */
const MAX_ROUNDS = 64
/** The Retry-After of a claim that lost MAX_ROUNDS races in a row. */
const CONTENDED_RETRY_MS = 1000

const encoder = new TextEncoder()
const decoder = new TextDecoder()

/** The record of a rental's or a renter's holdings: ids may hold characters a key cannot, so the key is their SHA-256. */
export function holdingsKey(scope: TicketLimitScope, owner: string): string {
  return `${scope}.${createHash('sha256').update(owner).digest('hex')}`
}

/** The bounds of the holdings bucket: a record per rental and per renter holding a ticket, each up to the larger bound. */
export function holdingsBucketLimits(maxTickets: number, bounds: TicketBounds): KvBucketLimits {
  return { maxKeys: 2 * maxTickets, maxValueBytes: RECORD_BYTES + HOLDING_BYTES * Math.max(bounds.maxPerRental, bounds.maxPerRenter) }
}

/** The holdings a record lists; none for a value that is no such record (the next write replaces it). */
export function holdingsOf(entry: KvEntry | null): Holding[] {
  if (entry === null) return []
  try {
    const v = JSON.parse(decoder.decode(entry.value)) as { tickets?: unknown }
    if (!Array.isArray(v.tickets)) return []
    return v.tickets.filter((h): h is Holding => Array.isArray(h) && h.length === 2 && typeof h[0] === 'string' && Number.isSafeInteger(h[1]))
  } catch {
    return []
  }
}

/** When a record may be deleted: once its last holding expired (at once for one that lists none). */
export function holdingsExpiry(entry: KvEntry): number {
  return Math.max(0, ...holdingsOf(entry).map((h) => h[1]))
}

/**
 * The places held against the per-rental and per-renter bounds, on the key-value port:
 * one record per rental and per renter listing its outstanding tickets with their
 * expiries, changed only by create-if-absent and update at the revision read, so that
 * processes sharing the bucket never together pass a bound. A record is pruned of expired
 * tickets at each write: a ticket whose spend was never recorded (its process died) frees
 * its place when it expires, never later.
 */
export class KvTicketHoldings {
  constructor(private readonly bucket: KvBucket) {}

  /** Adds the ticket `hash` to the owner's record; TicketLimitError when `max` are outstanding at `now`. */
  async claim(scope: TicketLimitScope, owner: string, hash: string, expiresAt: number, now: number, max: number): Promise<void> {
    const key = holdingsKey(scope, owner)
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const entry = await this.bucket.get(key)
      const value = encode(withTicket(holdingsOf(entry), hash, expiresAt, now, max, scope))
      try {
        await writeOverRead(this.bucket, key, entry, value)
        return
      } catch (err) {
        if (!isRevisionRace(err)) throw err
      }
    }
    throw new TicketLimitError(scope, CONTENDED_RETRY_MS)
  }

  /** Takes the ticket `hash` out of the owner's record, deleting a record left with none. */
  async release(scope: TicketLimitScope, owner: string, hash: string, now: number): Promise<void> {
    const key = holdingsKey(scope, owner)
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const entry = await this.bucket.get(key)
      if (entry === null) return
      const before = holdingsOf(entry)
      if (!before.some((h) => h[0] === hash)) return
      const after = withoutTicket(before, hash, now)
      try {
        await writeOverRead(this.bucket, key, entry, after.length === 0 ? null : encode(after))
        return
      } catch (err) {
        if (!isRevisionRace(err)) throw err
      }
    }
    // Lost every race: the place comes back when the ticket expires.
  }
}

function encode(held: readonly Holding[]): Uint8Array {
  return encoder.encode(JSON.stringify({ tickets: held }))
}
