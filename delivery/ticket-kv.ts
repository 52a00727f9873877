import { isKvError, type KvBucket, type KvBucketLimits, type KvEntry, type KvWatcher } from '../storage/index.js'
import { TicketStoreFullError, type TicketGrant, type TicketStore } from './ticket-store.js'

const PREFIX = 'ticket.'
/** A stored ticket: `{"rental_id","renter_id","token_id","expires_at"}`, well under this. */
const MAX_VALUE_BYTES = 512
/** How often expired tickets that were never used are deleted, at most. */
const SWEEP_MAX_MS = 60_000
/** After a watch ends (fell behind, bucket briefly away): when to watch again. */
const REWATCH_MS = 1000

export interface KvTicketStoreOptions {
  readonly bucket: KvBucket
  /** How often expired, unused tickets are deleted (default: every minute). */
  readonly sweepMs?: number
  readonly onWarning?: (message: string, err?: unknown) => void
}

interface Held {
  readonly revision: number
  readonly expiresAt: number
}

/**
 * Stream tickets on the key-value port, so a ticket issued by one process opens a stream
 * on any other that shares the bucket (NATS KV in a cluster; files under DATA_DIR/kv here).
 * Each ticket is one key, `ticket.<sha256 of the ticket>`, written with create-if-absent
 * and holding its expiry; it is taken by a delete with the revision that was read, so of
 * two processes taking one ticket at once exactly one gets the grant. The port has no
 * per-key TTL: every process keeps an index of the bucket (its watch) and deletes the
 * expired keys, each with its revision, so sweeps of several processes never collide
 * with a take. Bounded by the bucket's maxKeys: past it a new ticket is refused
 * (TicketStoreFullError) once a sweep of the expired ones found no room.
 */
export class KvTicketStore implements TicketStore {
  readonly #bucket: KvBucket
  readonly #onWarning: (message: string, err?: unknown) => void
  /** Every ticket key of the bucket with its revision and expiry, as the watch reports them. */
  readonly #index = new Map<string, Held>()
  readonly #sweeper: NodeJS.Timeout
  #watcher: KvWatcher | undefined
  #watching: Promise<void> | undefined
  #closed = false

  /** The bounds to open the tickets bucket with: one key per outstanding ticket. */
  static bucketLimits(maxTickets: number): KvBucketLimits {
    return { maxKeys: maxTickets, maxValueBytes: MAX_VALUE_BYTES }
  }

  private constructor(o: KvTicketStoreOptions) {
    this.#bucket = o.bucket
    this.#onWarning = o.onWarning ?? (() => undefined)
    this.#sweeper = setInterval(() => void this.sweep(Date.now()).catch((err: unknown) => this.#onWarning('stream tickets: expired tickets not deleted', err)), Math.min(o.sweepMs ?? SWEEP_MAX_MS, SWEEP_MAX_MS))
    this.#sweeper.unref()
  }

  /** Opens the store on `bucket`; resolves once the tickets it holds are indexed. */
  static async open(o: KvTicketStoreOptions): Promise<KvTicketStore> {
    const store = new KvTicketStore(o)
    await store.#watch()
    return store
  }

  /** Ticket keys held, expired ones not yet swept included. */
  get size(): number {
    return this.#index.size
  }

  async put(hash: string, grant: TicketGrant, expiresAt: number): Promise<void> {
    const value = new TextEncoder().encode(JSON.stringify({ rental_id: grant.rental_id, renter_id: grant.renter_id, ...(grant.token_id !== undefined && { token_id: grant.token_id }), expires_at: expiresAt }))
    try {
      await this.#bucket.create(PREFIX + hash, value)
    } catch (err) {
      if (!isKvError(err, 'bucket_full')) throw err
      // Full of tickets, some perhaps expired: clear those and try once more.
      await this.sweep(Date.now())
      try {
        await this.#bucket.create(PREFIX + hash, value)
      } catch (again) {
        if (isKvError(again, 'bucket_full')) throw new TicketStoreFullError()
        throw again
      }
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
    if (held === undefined) this.#onWarning(`stream tickets: ${entry.key} does not hold a ticket; deleted`)
    return held !== undefined && held.expiresAt > now ? held.grant : undefined
  }

  /** Deletes the tickets expired at `now`; returns how many this call deleted. */
  async sweep(now: number): Promise<number> {
    let deleted = 0
    for (const [key, held] of [...this.#index]) {
      if (held.expiresAt > now || this.#closed) continue
      try {
        await this.#bucket.delete(key, { revision: held.revision })
        deleted++
      } catch (err) {
        // Taken or swept meanwhile by this or another process.
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
    return deleted
  }

  async close(): Promise<void> {
    this.#closed = true
    clearInterval(this.#sweeper)
    this.#watcher?.stop()
    await this.#watching
  }

  async #watch(): Promise<void> {
    const watcher = this.#bucket.watch({ key: `${PREFIX}>` })
    this.#watcher = watcher
    this.#watching = (async () => {
      try {
        for await (const entry of watcher) {
          if (entry.operation === 'DEL') {
            if ((this.#index.get(entry.key)?.revision ?? 0) <= entry.revision) this.#index.delete(entry.key)
            continue
          }
          // A value that is no ticket never grants anything; expired at once, the sweep deletes it.
          this.#index.set(entry.key, { revision: entry.revision, expiresAt: decode(entry)?.expiresAt ?? 0 })
        }
      } catch (err) {
        if (this.#closed) return
        // Fell behind (watch_overflow) or lost the bucket for a while: watch again from the current values.
        this.#onWarning('stream tickets: the bucket watch ended; watching again', err)
        this.#index.clear()
        setTimeout(() => void this.#watch().catch((again: unknown) => this.#onWarning('stream tickets: the bucket cannot be watched', again)), REWATCH_MS).unref()
      }
    })()
    await watcher.initialized
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
