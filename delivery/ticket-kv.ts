import { isKvError, type KvBucket, type KvBucketLimits, type KvEntry } from '../storage/index.js'
import { KvExpiringKeys } from './kv-expiring-keys.js'
import { holdingsBucketLimits, holdingsExpiry, KvTicketHoldings } from './ticket-holdings-kv.js'
import { TicketStoreFullError, type TicketBounds, type TicketGrant, type TicketStore } from './ticket-store.js'

const PREFIX = 'ticket.'
/** A stored ticket: `{"rental_id","renter_id","token_id","expires_at"}`, well under this. */
const MAX_VALUE_BYTES = 512
/** How often expired tickets that were never used are deleted, at most. */
const SWEEP_MAX_MS = 60_000

export interface KvTicketStoreOptions {
  /** The tickets: one key per ticket. */
  readonly bucket: KvBucket
  /** The places held against `bounds`: one record per rental and per renter holding tickets. */
  readonly holdings: KvBucket
  readonly bounds: TicketBounds
  /** How often expired, unused tickets are deleted (default: every minute). */
  readonly sweepMs?: number
  readonly onWarning?: (message: string, err?: unknown) => void
}

/**
 * Stream tickets on the key-value port, so a ticket issued by one process opens a stream
 * on any other that shares the buckets (NATS KV in a cluster; files under DATA_DIR/kv here).
 * Each ticket is one key, `ticket.<sha256 of the ticket>`, written with create-if-absent
 * and holding its expiry; it is taken by a delete with the revision that was read, so of
 * two processes taking one ticket at once exactly one gets the grant.
 *
 * Before its key is written a ticket takes a place in its rental's record, then in its
 * renter's (KvTicketHoldings), each at an expected revision, so the per-rental and
 * per-renter bounds hold across processes; a refusal, or a failure after the first place
 * was taken, gives back what was taken. Spending a ticket gives its places back; a process
 * that dies in between leaves them to free themselves when the ticket expires.
 *
 * The port has no per-key TTL: every process keeps an index of both buckets (their
 * watches) and deletes expired tickets and records whose tickets all expired. The tickets
 * bucket's maxKeys bounds all tickets together: past it a new ticket is refused
 * (TicketStoreFullError) once a sweep of the expired ones found no room.
 */
export class KvTicketStore implements TicketStore {
  readonly #bucket: KvBucket
  readonly #holdings: KvTicketHoldings
  readonly #bounds: TicketBounds
  readonly #onWarning: (message: string, err?: unknown) => void
  readonly #sweeper: NodeJS.Timeout
  #tickets: KvExpiringKeys | undefined
  #records: KvExpiringKeys | undefined

  /** The bounds to open the tickets bucket with: one key per outstanding ticket. */
  static bucketLimits(maxTickets: number): KvBucketLimits {
    return { maxKeys: maxTickets, maxValueBytes: MAX_VALUE_BYTES }
  }

  /** The bounds to open the holdings bucket with. */
  static holdingsLimits(maxTickets: number, bounds: TicketBounds): KvBucketLimits {
    return holdingsBucketLimits(maxTickets, bounds)
  }

  private constructor(o: KvTicketStoreOptions) {
    this.#bucket = o.bucket
    this.#holdings = new KvTicketHoldings(o.holdings)
    this.#bounds = o.bounds
    this.#onWarning = o.onWarning ?? (() => undefined)
    this.#sweeper = setInterval(() => void this.sweep(Date.now()).catch((err: unknown) => this.#onWarning('stream tickets: expired tickets not deleted', err)), Math.min(o.sweepMs ?? SWEEP_MAX_MS, SWEEP_MAX_MS))
    this.#sweeper.unref()
  }

  /** Opens the store on its buckets; resolves once the tickets and records they hold are indexed. */
  static async open(o: KvTicketStoreOptions): Promise<KvTicketStore> {
    const store = new KvTicketStore(o)
    try {
      // A value that is no ticket never grants anything; expired at once, the sweep deletes it.
      store.#tickets = await KvExpiringKeys.open({ bucket: o.bucket, key: `${PREFIX}>`, expiryOf: (e) => decode(e)?.expiresAt ?? 0, what: 'stream tickets', onWarning: store.#onWarning })
      store.#records = await KvExpiringKeys.open({ bucket: o.holdings, expiryOf: holdingsExpiry, what: 'stream ticket holdings', onWarning: store.#onWarning })
    } catch (err) {
      await store.close()
      throw err
    }
    return store
  }

  /** Ticket keys held, expired ones not yet swept included. */
  get size(): number {
    return this.#tickets?.size ?? 0
  }

  async put(hash: string, grant: TicketGrant, expiresAt: number, now: number): Promise<void> {
    const value = new TextEncoder().encode(JSON.stringify({ rental_id: grant.rental_id, renter_id: grant.renter_id, ...(grant.token_id !== undefined && { token_id: grant.token_id }), expires_at: expiresAt }))
    const taken: [scope: 'rental' | 'renter', owner: string][] = []
    try {
      for (const [scope, owner, max] of [['rental', grant.rental_id, this.#bounds.maxPerRental], ['renter', grant.renter_id, this.#bounds.maxPerRenter]] as const) {
        await this.#full(now, () => this.#holdings.claim(scope, owner, hash, expiresAt, now, max))
        taken.push([scope, owner])
      }
      await this.#full(now, () => this.#bucket.create(PREFIX + hash, value))
    } catch (err) {
      for (const [scope, owner] of taken) await this.#holdings.release(scope, owner, hash, now).catch((again: unknown) => this.#onWarning('stream tickets: a place not given back; it frees itself when the ticket expires', again))
      throw err
    }
  }

  async peek(hash: string, now: number): Promise<TicketGrant | undefined> {
    const entry = await this.#bucket.get(PREFIX + hash)
    const held = entry === null ? undefined : decode(entry)
    return held !== undefined && held.expiresAt > now ? held.grant : undefined
  }

  async take(hash: string, now: number): Promise<TicketGrant | undefined> {
    const entry = await this.#bucket.get(PREFIX + hash)
    if (entry === null) return undefined
    try {
      // Only the value that was read: another process's take or sweep in between wins, and this one gets nothing.
      await this.#bucket.delete(PREFIX + hash, { revision: entry.revision })
    } catch (err) {
      if (isKvError(err, 'wrong_revision')) return undefined
      throw err
    }
    const held = decode(entry)
    if (held === undefined) {
      this.#onWarning(`stream tickets: ${entry.key} does not hold a ticket; deleted`)
      return undefined
    }
    // Spent: its places come back now, not at its expiry. A failure here costs the renter those places until then, not the spend.
    for (const [scope, owner] of [['rental', held.grant.rental_id], ['renter', held.grant.renter_id]] as const) {
      await this.#holdings.release(scope, owner, hash, now).catch((err: unknown) => this.#onWarning('stream tickets: a spent ticket\'s place not given back; it frees itself when the ticket expires', err))
    }
    return held.expiresAt > now ? held.grant : undefined
  }

  /** Deletes the tickets, and the records of places, expired at `now`; returns how many tickets this call deleted. */
  async sweep(now: number): Promise<number> {
    const deleted = (await this.#tickets?.sweep(now)) ?? 0
    await this.#records?.sweep(now)
    return deleted
  }

  async close(): Promise<void> {
    clearInterval(this.#sweeper)
    await this.#tickets?.close()
    await this.#records?.close()
  }

  /** Runs `write`; when its bucket is full, sweeps the expired keys and tries once more, then refuses with TicketStoreFullError. */
  async #full(now: number, write: () => Promise<unknown>): Promise<void> {
    try {
      await write()
    } catch (err) {
      if (!isKvError(err, 'bucket_full')) throw err
      // Full, some perhaps expired: clear those and try once more.
      await this.sweep(now)
      try {
        await write()
      } catch (again) {
        if (isKvError(again, 'bucket_full')) throw new TicketStoreFullError()
        throw again
      }
    }
  }
}

function decode(entry: KvEntry): { grant: TicketGrant; expiresAt: number } | undefined {
  try {
    const v = JSON.parse(new TextDecoder().decode(entry.value)) as Record<string, unknown>
    if (typeof v['rental_id'] !== 'string' || typeof v['renter_id'] !== 'string' || !Number.isSafeInteger(v['expires_at'])) return undefined
    if (v['token_id'] !== undefined && typeof v['token_id'] !== 'string') return undefined
    const grant: TicketGrant = { rental_id: v['rental_id'], renter_id: v['renter_id'], ...(typeof v['token_id'] === 'string' && { token_id: v['token_id'] }) }
    return { grant, expiresAt: v['expires_at'] as number }
  } catch {
    return undefined
  }
}
