import { newId } from '../registry/index.js'
import type { DeliveryFilter } from '../schemas/index.js'
import { isKvError, type KvBucket, type KvBucketLimits, type KvEntry, type KvWatcher } from '../storage/index.js'
import { ExpirySchedule } from './expiry-schedule.js'
import { RENTAL_LIMITS } from './limits.js'
import { OpenClaims } from './open-claims.js'
import { decodeRental, effectiveRental, encodeRental, isActive, isFinal, type RentalRecord, type RentalState } from './records.js'
import { RentalError } from './rental-error.js'
import { RentalIndex } from './rental-index.js'

const RENTAL_PREFIX = 'rental.'
const CLAIMS_PREFIX = 'claims.'
/** How often ended rentals past their keeping time are deleted. */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000
/** Deletions per sweep at most, so one sweep stays short; the next one goes on. */
const SWEEP_MAX_DELETIONS = 10_000
/** A failed expiry write is tried again this much later. */
const EXPIRY_RETRY_MS = 1000

export interface RentalsOptions {
  /** The bucket holding the rentals (and the open-rental claims); the caller opens and closes it. */
  readonly bucket: KvBucket
  /** Rentals held in all, ended ones included; a creation past it is refused with limit_exceeded. */
  readonly maxRentals: number
  /** How long an ended or expired rental is kept (and readable) before it is deleted. */
  readonly keepEndedMs: number
  readonly openPerRenter?: number
  readonly openPerSource?: number
  readonly now?: () => number
  readonly onWarning?: (message: string, err?: unknown) => void
}

export interface NewRental {
  readonly renter_id: string
  readonly source_id: string
  readonly creator_id: string
  /** Milliseconds since the epoch. */
  /** Milliseconds since the epoch; undefined starts it at its creation, so starts_at equals created_at. */
  readonly starts_at: number | undefined
  readonly expires_at: number | null
}

export interface RentalFilter {
  readonly renter_id?: string
  readonly source_id?: string
}

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * The rentals, on a KV bucket (`rental.<rental_id>` keys) shared by every process: reads
 * come from an index kept from the bucket's watch, writes go to the bucket with
 * create-if-absent or an expected revision, so two processes (or two requests) racing
 * to end, expire or create never overwrite each other. Expiry needs no request: one
 * timer for the nearest expires_at writes the rental `expired`; every process runs it,
 * and the expected revision lets one write win.
 */
export class Rentals {
  readonly #bucket: KvBucket
  readonly #options: RentalsOptions
  readonly #now: () => number
  readonly #index = new RentalIndex()
  readonly #claimKeys = new Set<string>()
  readonly #claims: OpenClaims
  readonly #schedule: ExpirySchedule
  readonly #listeners = new Set<(rental: RentalRecord) => void>()
  #watcher: KvWatcher | undefined
  #watching: Promise<void> = Promise.resolve()
  #sweeper: NodeJS.Timeout | undefined
  #closed = false

  private constructor(options: RentalsOptions) {
    this.#bucket = options.bucket
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#claims = new OpenClaims(this.#bucket, this.#now, (id, claimedAt) => this.#claimHolds(id, claimedAt))
    this.#schedule = new ExpirySchedule((ids) => void this.#expire(ids), this.#now)
  }

  /** Resolves once every rental the bucket holds is in the index. */
  static async open(options: RentalsOptions): Promise<Rentals> {
    const rentals = new Rentals(options)
    await rentals.#watch()
    rentals.#sweeper = setInterval(() => void rentals.sweep().catch((err: unknown) => options.onWarning?.('rentals: sweep failed', err)), SWEEP_INTERVAL_MS).unref()
    return rentals
  }

  /**
   * The bounds to open the rentals bucket with: each rental is one key, and adds at most
   * two claims documents (its renter's and its source's).
   */
  static bucketLimits(maxRentals: number): KvBucketLimits {
    return { maxKeys: 3 * maxRentals, maxValueBytes: RENTAL_LIMITS.maxValueBytes }
  }

  /** Rentals in the index (ended ones included). */
  get size(): number {
    return this.#index.size
  }

  /** Creates a rental; RentalError limit_exceeded past a bound. */
  async create(input: NewRental): Promise<RentalRecord> {
    const max = this.#options.maxRentals
    if (this.#index.size >= max) throw new RentalError('limit_exceeded', `the gateway holds ${max} rentals, the most it keeps; ended ones are deleted after their keeping time`)
    const now = this.#now()
    const startsAt = input.starts_at ?? now
    const record: RentalRecord = {
      rental_id: newId('rnt'),
      renter_id: input.renter_id,
      source_id: input.source_id,
      creator_id: input.creator_id,
      state: startsAt > now ? 'scheduled' : 'active',
      starts_at: iso(startsAt),
      expires_at: input.expires_at === null ? null : iso(input.expires_at),
      ended_at: null,
      end_reason: null,
      created_at: iso(now),
    }
    const renterKey = OpenClaims.renterKey(input.renter_id)
    const sourceKey = OpenClaims.sourceKey(input.source_id)
    await this.#claims.claim(renterKey, record.rental_id, this.#options.openPerRenter ?? RENTAL_LIMITS.openPerRenter, `renter ${input.renter_id}`)
    try {
      await this.#claims.claim(sourceKey, record.rental_id, this.#options.openPerSource ?? RENTAL_LIMITS.openPerSource, `source ${input.source_id}`)
    } catch (err) {
      await this.#claims.release(renterKey, record.rental_id)
      throw err
    }
    let revision: number
    try {
      revision = await this.#bucket.create(RENTAL_PREFIX + record.rental_id, encodeRental(record))
    } catch (err) {
      await this.#claims.release(renterKey, record.rental_id)
      await this.#claims.release(sourceKey, record.rental_id)
      throw err
    }
    this.#take(record, revision)
    return effectiveRental(record, this.#now())
  }

  /** The rental as it stands now, or undefined. */
  get(rentalId: string): RentalRecord | undefined {
    const held = this.#index.get(rentalId)
    return held === undefined ? undefined : effectiveRental(held.record, this.#now())
  }

  /**
   * The rentals of a renter, of a source, or all, oldest first, as stored: pass each
   * through `view` (the state filter is the effective state's). Not copied: read it
   * before the next await.
   */
  candidates(filter: RentalFilter): readonly RentalRecord[] {
    let list: readonly RentalRecord[]
    if (filter.renter_id !== undefined) list = this.#index.ofRenter(filter.renter_id)
    else if (filter.source_id !== undefined) list = this.#index.ofSource(filter.source_id)
    else return this.#index.all()
    return list.filter((r) => (filter.renter_id === undefined || r.renter_id === filter.renter_id) && (filter.source_id === undefined || r.source_id === filter.source_id))
  }

  /** A stored rental as it stands at `now`. */
  view(rental: RentalRecord, now = this.#now()): RentalRecord {
    return effectiveRental(rental, now)
  }

  /** Whether `rental`'s state at `now` is `state`. */
  isIn(rental: RentalRecord, state: RentalState, now = this.#now()): boolean {
    return effectiveRental(rental, now).state === state
  }

  /**
   * Ends the rental now. Ending one that has ended or expired changes nothing and
   * returns it as it is, so a retried request gets the same answer.
   */
  async end(rentalId: string): Promise<RentalRecord> {
    const key = RENTAL_PREFIX + rentalId
    for (let attempt = 0; attempt < RENTAL_LIMITS.writeAttempts; attempt++) {
      // From the bucket, not the index: the write needs the newest revision.
      const entry = await this.#bucket.get(key)
      const record = entry === null ? undefined : decodeRental(entry.value)
      if (entry === null || record === undefined) throw new RentalError('not_found', 'no such rental')
      const now = this.#now()
      const current = effectiveRental(record, now)
      if (isFinal(current)) return current
      const ended: RentalRecord = { ...record, state: 'ended', ended_at: iso(now), end_reason: 'ended' }
      try {
        this.#take(ended, await this.#bucket.update(key, encodeRental(ended), entry.revision))
        return ended
      } catch (err) {
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
    throw new RentalError('busy', 'the rental is being changed by other requests; retry')
  }

  /**
   * Sets the rental's delivery filter (null clears it), written at the record's revision
   * so that an end or an expiry racing with it is never overwritten. The watch brings it
   * to every process, whose channels apply it from then on.
   */
  async setFilter(rentalId: string, filter: DeliveryFilter | null): Promise<RentalRecord> {
    const key = RENTAL_PREFIX + rentalId
    for (let attempt = 0; attempt < RENTAL_LIMITS.writeAttempts; attempt++) {
      const entry = await this.#bucket.get(key)
      const record = entry === null ? undefined : decodeRental(entry.value)
      if (entry === null || record === undefined) throw new RentalError('not_found', 'no such rental')
      const next: RentalRecord = { ...record }
      if (filter === null) delete next.filter
      else next.filter = filter
      try {
        this.#take(next, await this.#bucket.update(key, encodeRental(next), entry.revision))
        return effectiveRental(next, this.#now())
      } catch (err) {
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
    throw new RentalError('busy', 'the rental is being changed by other requests; retry')
  }

  /** The rentals of `sourceId` that receive what it accepted at `time` (ms since the epoch). */
  activeAt(sourceId: string, time: number): RentalRecord[] {
    return this.#index.ofSource(sourceId).filter((r) => isActive(r, time))
  }

  /**
   * Calls `listener` with each rental as it changes (created, ended, expired, deleted
   * records excepted), from this process's writes and from other processes' through the
   * bucket's watch. Returns the function that stops the calls.
   */
  onChange(listener: (rental: RentalRecord) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }

  /**
   * Deletes rentals that ended more than keepEndedMs ago, and claims documents none of
   * whose claims hold, so the bucket holds what is open and what ended recently.
   */
  async sweep(): Promise<number> {
    const now = this.#now()
    const old = this.#index.all().filter((r) => {
      const current = effectiveRental(r, now)
      return isFinal(current) && Date.parse(current.ended_at as string) <= now - this.#options.keepEndedMs
    })
    let deleted = 0
    for (const r of old.slice(0, SWEEP_MAX_DELETIONS)) {
      const held = this.#index.get(r.rental_id)
      if (held === undefined || this.#closed) continue
      try {
        await this.#bucket.delete(RENTAL_PREFIX + r.rental_id, { revision: held.revision })
        // Gone from the index now, not when the watch brings the deletion (any revision past the record's will do).
        this.#index.remove(r.rental_id, held.revision + 1)
        deleted++
      } catch (err) {
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
    for (const key of [...this.#claimKeys]) if (!this.#closed) await this.#claims.dropIfLapsed(key)
    return deleted
  }

  /** Stops the timers and the watch. The bucket is the caller's to close. Safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true
    this.#schedule.stop()
    clearInterval(this.#sweeper)
    this.#watcher?.stop()
    await this.#watching
  }

  /** Watches the bucket from its current values; resolves once they are all in the index. */
  async #watch(): Promise<void> {
    const watcher = this.#bucket.watch()
    this.#watcher = watcher
    this.#watching = (async () => {
      try {
        for await (const entry of watcher) this.#apply(entry)
      } catch (err) {
        if (this.#closed) return
        // Fell behind (watch_overflow) or lost the bucket for a while: start again from
        // the current values, which the revisions make safe to take twice.
        this.#options.onWarning?.('rentals: the bucket watch ended; watching again', err)
        setTimeout(() => void this.#watch().catch((again: unknown) => this.#options.onWarning?.('rentals: the bucket cannot be watched', again)), EXPIRY_RETRY_MS).unref()
      }
    })()
    await watcher.initialized
  }

  #apply(entry: KvEntry): void {
    if (entry.key.startsWith(CLAIMS_PREFIX)) {
      if (entry.operation === 'DEL') this.#claimKeys.delete(entry.key)
      else this.#claimKeys.add(entry.key)
      return
    }
    if (!entry.key.startsWith(RENTAL_PREFIX)) return
    if (entry.operation === 'DEL') {
      this.#index.remove(entry.key.slice(RENTAL_PREFIX.length), entry.revision)
      return
    }
    const record = decodeRental(entry.value)
    if (record === undefined || RENTAL_PREFIX + record.rental_id !== entry.key) {
      this.#options.onWarning?.(`rentals: ${entry.key} does not hold a rental record; left out`)
      return
    }
    this.#take(record, entry.revision)
  }

  /** Takes a record at `revision` into the index, if newer, and tells the listeners. */
  #take(record: RentalRecord, revision: number): void {
    if (!this.#index.put(record, revision)) return
    if (!isFinal(record) && record.expires_at !== null) this.#schedule.add(Date.parse(record.expires_at), record.rental_id)
    const view = effectiveRental(record, this.#now())
    for (const listener of this.#listeners) {
      try {
        listener(view)
      } catch (err) {
        this.#options.onWarning?.('rentals: a change listener failed', err)
      }
    }
  }

  #claimHolds(rentalId: string, claimedAt: number): boolean {
    const held = this.#index.get(rentalId)
    if (held === undefined) return this.#now() - claimedAt < RENTAL_LIMITS.claimGraceMs
    return !isFinal(effectiveRental(held.record, this.#now()))
  }

  /** Writes each due rental `expired`, unless it ended otherwise meanwhile. */
  async #expire(ids: string[]): Promise<void> {
    for (const id of ids) {
      if (this.#closed) return
      const key = RENTAL_PREFIX + id
      try {
        for (let attempt = 0; attempt < RENTAL_LIMITS.writeAttempts; attempt++) {
          const entry = await this.#bucket.get(key)
          const record = entry === null ? undefined : decodeRental(entry.value)
          if (entry === null || record === undefined || isFinal(record) || record.expires_at === null) break
          const expiresAt = Date.parse(record.expires_at)
          if (this.#now() < expiresAt) {
            this.#schedule.add(expiresAt, id)
            break
          }
          const expired: RentalRecord = { ...record, state: 'expired', ended_at: record.expires_at, end_reason: 'expired' }
          try {
            this.#take(expired, await this.#bucket.update(key, encodeRental(expired), entry.revision))
            break
          } catch (err) {
            // Another process expired or ended it first: read it again.
            if (!isKvError(err, 'wrong_revision')) throw err
          }
        }
      } catch (err) {
        // Reads already show it expired; the write is tried again.
        this.#options.onWarning?.(`rentals: ${id} not written as expired; trying again`, err)
        this.#schedule.add(this.#now() + EXPIRY_RETRY_MS, id)
      }
    }
  }
}
