import { isKvError, isRevisionRace, KvError, writeOverRead, type KvBucket } from '../storage/index.js'
import { scanExpiredKeys } from './kv-expired-scan.js'
import { encodeEntries, entriesOf, HOLDER_MAX_CHARS, liveEntries, placesKey, RECORD_PREFIX, recordExpiry, type HolderEntry } from './stream-places-record.js'
import { STREAM_CAP_RETRY_MS, StreamLimitError, StreamPlacesUnavailableError, type StreamPlace, type StreamPlaces } from './stream-places.js'

/**
 * How often a process writes its entry again on each rental where it holds streams, and
 * how long an entry counts without that. 5 s and 15 s: a process killed with `kill -9`
 * frees its places 15 s after its last renewal at most; a live one has a full renewal
 * period of margin before its entry would expire (timers running late on a busy loop,
 * host clocks a little apart: entries hold absolute times, judged by each reader's
 * clock, so the hosts' clocks must agree well within 5 s, as NTP keeps them). A
 * renewal that failed is tried again at the next tick; one that cannot succeed before the
 * entry expires gives the places up instead (the streams end), so that no other process
 * is ever admitted to a place still in use.
 */
export const STREAM_PLACE_TIMING = { renewMs: 5000, expireMs: 15_000 } as const
/**
 * Reads and writes at an expected revision one admission or release makes before it
 * gives up. Each lost round means another write of the same record won, so only a burst
 * of admissions on one rental exhausts them; the admission is then refused as over the cap.
 */
const MAX_ROUNDS = 64
/** The Retry-After of an admission that lost MAX_ROUNDS races in a row. */
const CONTENDED_RETRY_MS = 1000
/** Records renewed at once by one tick: renewals of many rentals go in parallel, bounded so a tick never floods the store. */
const RENEW_CONCURRENCY = 32
/**
 * How often every record whose entries all expired (left by a process that died) is
 * deleted, at most; also at once when the bucket is full. A record only takes room,
 * never places: an expired entry counts for nothing.
 */
const SWEEP_MS = 300_000

export interface KvStreamPlacesOptions {
  /** One record per rental with a stream open, shared by every process that serves the rentals' streams. */
  readonly bucket: KvBucket
  /** Streams of one rental open at once over every process on the bucket (STREAM_MAX_PER_RENTAL). */
  readonly max: number
  /** This process's name in the records, unique to this start of it (at most 100 characters). */
  readonly holder: string
  readonly renewMs?: number
  readonly expireMs?: number
  readonly sweepMs?: number
  readonly now?: () => number
  readonly onWarning?: (message: string, err?: unknown) => void
}

/** What this process knows of one rental: its places here, and what its entry in the rental's record says. */
interface RentalHold {
  readonly rentalId: string
  readonly key: string
  readonly places: Set<KvPlace>
  /** Until when the entry last written counts (0: none written). */
  written: number
  /** The count last written (0: no entry). */
  writtenCount: number
  /** A write failed: the record may not say what `places` holds, until the next write. */
  unsure: boolean
  /** This rental's reads and writes, one at a time, so that this process never races itself. */
  queue: Promise<void>
  pending: number
}

/**
 * Places on the key-value port, exact across processes: each rental's record lists, per
 * process, how many of its streams that process holds and until when the entry counts.
 * An admission reads the record, sums the entries that have not expired, and writes its
 * own entry one higher at the revision read (create-if-absent for a new record), so of
 * processes admitting at once only those that fit are admitted; a release writes it one
 * lower (the last one deletes it). Each process renews its entries on a timer, one write
 * per rental per period whatever its number of streams, so a process that dies frees its
 * places when its entries expire (STREAM_PLACE_TIMING).
 */
export class KvStreamPlaces implements StreamPlaces {
  readonly #bucket: KvBucket
  readonly #max: number
  readonly #holder: string
  readonly #renewMs: number
  readonly #expireMs: number
  readonly #now: () => number
  readonly #onWarning: (message: string, err?: unknown) => void
  readonly #rentals = new Map<string, RentalHold>()
  readonly #timers: NodeJS.Timeout[] = []
  #held = 0
  #renewing: Promise<void> | undefined
  #sweeping: Promise<number> | undefined
  #closing: Promise<void> | undefined
  #stopped = false

  constructor(o: KvStreamPlacesOptions) {
    if (o.holder.length === 0 || o.holder.length > HOLDER_MAX_CHARS) throw new RangeError(`holder must be 1 to ${HOLDER_MAX_CHARS} characters`)
    this.#bucket = o.bucket
    this.#max = o.max
    this.#holder = o.holder
    this.#renewMs = o.renewMs ?? STREAM_PLACE_TIMING.renewMs
    this.#expireMs = o.expireMs ?? STREAM_PLACE_TIMING.expireMs
    if (this.#renewMs >= this.#expireMs) throw new RangeError('renewMs must be shorter than expireMs')
    this.#now = o.now ?? Date.now
    this.#onWarning = o.onWarning ?? (() => undefined)
    const renewer = setInterval(() => void this.renew().catch((err: unknown) => this.#onWarning('stream places: a renewal round failed', err)), this.#renewMs)
    const sweeper = setInterval(() => void this.sweep(this.#now()).catch((err: unknown) => this.#onWarning('stream places: expired records not deleted', err)), o.sweepMs ?? SWEEP_MS)
    for (const timer of [renewer, sweeper]) {
      timer.unref()
      this.#timers.push(timer)
    }
  }

  get held(): number {
    return this.#held
  }

  async take(rentalId: string, onLost: () => void): Promise<StreamPlace> {
    if (this.#stopped) throw new StreamPlacesUnavailableError()
    const hold = this.#hold(rentalId)
    // This process alone fills the rental: no need to ask the store.
    if (hold.places.size >= this.#max) throw new StreamLimitError(STREAM_CAP_RETRY_MS)
    return this.#serial(hold, async () => {
      try {
        if (!(await this.#writeOwn(hold, 1))) throw new StreamLimitError(CONTENDED_RETRY_MS)
      } catch (err) {
        if (err instanceof KvError) throw new StreamPlacesUnavailableError({ cause: err })
        throw err
      }
      const place = new KvPlace(rentalId, onLost, (p) => this.#giveBack(hold, p))
      hold.places.add(place)
      this.#held++
      return place
    })
  }

  /**
   * Writes this process's entry again on every rental where it holds streams and has not
   * written for half a renewal period (so each tick renews what the last tick or an
   * admission wrote), and on those whose last write failed. The timer runs it;
   * a round still under way is not started twice.
   */
  renew(): Promise<void> {
    this.#renewing ??= this.#renewRound().finally(() => (this.#renewing = undefined))
    return this.#renewing
  }

  /** Deletes the records whose entries all expired at `now` (each at the revision read); returns how many. */
  sweep(now: number): Promise<number> {
    this.#sweeping ??= scanExpiredKeys(this.#bucket, `${RECORD_PREFIX}>`, recordExpiry, now).finally(() => (this.#sweeping = undefined))
    return this.#sweeping
  }

  close(): Promise<void> {
    // A destroyed store writes nothing more: its entries are left to expire.
    this.#closing ??= this.#stopped ? Promise.resolve() : this.#close()
    return this.#closing
  }

  destroy(): void {
    this.#stopped = true
    for (const timer of this.#timers) clearInterval(timer)
  }

  async #close(): Promise<void> {
    this.destroy()
    // Given back at once rather than left to expire: the next process is admitted now.
    await Promise.all(
      [...this.#rentals.values()].map((hold) => {
        for (const place of hold.places) place.drop()
        this.#held -= hold.places.size
        hold.places.clear()
        return this.#serial(hold, () => this.#writeOwn(hold, 0, true)).catch((err: unknown) => this.#onWarning('stream places: an entry not given back at close; it expires', err))
      }),
    )
  }

  async #renewRound(): Promise<void> {
    const due = [...this.#rentals.values()].filter((hold) => hold.unsure || hold.writtenCount !== hold.places.size || (hold.places.size > 0 && this.#now() >= hold.written - this.#expireMs + this.#renewMs / 2))
    let next = 0
    const worker = async () => {
      while (next < due.length && !this.#stopped) {
        const hold = due[next++]!
        await this.#serial(hold, () => this.#writeOwn(hold, 0)).catch((err: unknown) => {
          // The entry would expire before the next tick could write it: other processes may soon take these places.
          if (hold.places.size > 0 && this.#now() + this.#renewMs >= hold.written) {
            this.#onWarning(`stream places: the places of rental ${hold.rentalId} could not be renewed before they expire; its streams here end`, err)
            this.#lose(hold)
          }
        })
      }
    }
    await Promise.all(Array.from({ length: Math.min(RENEW_CONCURRENCY, due.length) }, worker))
  }

  /**
   * Reads the rental's record and writes this process's entry as `places + adding` at the
   * revision read, dropping expired entries. Resolves false when an admission (`adding`)
   * lost every round; StreamLimitError when it would pass the cap; a KvError when the
   * store failed (the hold is then unsure, and the next renewal writes it again).
   */
  async #writeOwn(hold: RentalHold, adding: 0 | 1, closing = false): Promise<boolean> {
    let swept = false
    for (let round = 0; round < MAX_ROUNDS; round++) {
      if (this.#stopped && !closing) {
        if (adding > 0) throw new StreamPlacesUnavailableError()
        return true
      }
      const entry = await this.#bucket.get(hold.key)
      const now = this.#now()
      const live = liveEntries(entriesOf(entry), now)
      const own = live.find((e) => e[0] === this.#holder)
      // Held here but no longer counted there (the entry expired before it was renewed): another process may have the places.
      if (hold.places.size > 0 && own === undefined && hold.written > 0) this.#lose(hold)
      const others = live.filter((e) => e[0] !== this.#holder)
      const count = hold.places.size + adding
      if (adding > 0 && others.reduce((n, e) => n + e[1], 0) + count > this.#max) throw new StreamLimitError(STREAM_CAP_RETRY_MS)
      const expiresAt = now + this.#expireMs
      const next: HolderEntry[] = count > 0 ? [...others, [this.#holder, count, expiresAt]] : others
      try {
        await writeOverRead(this.#bucket, hold.key, entry, next.length > 0 ? encodeEntries(next) : null)
      } catch (err) {
        if (isRevisionRace(err)) continue
        if (isKvError(err, 'bucket_full') && !swept) {
          // Full, perhaps of records left by processes that died: clear those and try again.
          swept = true
          await this.sweep(now)
          continue
        }
        hold.unsure = true
        throw err
      }
      hold.written = count > 0 ? expiresAt : 0
      hold.writtenCount = count
      hold.unsure = false
      return true
    }
    hold.unsure = true
    return false
  }

  #giveBack(hold: RentalHold, place: KvPlace): void {
    hold.places.delete(place)
    this.#held--
    if (this.#stopped) return
    // Written now, so the place is free for every process at once; a failure is written again by the next renewal.
    void this.#serial(hold, () => this.#writeOwn(hold, 0)).catch(() => undefined)
  }

  /** The rental's places here are no longer counted in the store: each stream holding one is told to end. */
  #lose(hold: RentalHold): void {
    const lost = [...hold.places]
    hold.places.clear()
    this.#held -= lost.length
    for (const place of lost) place.lose()
  }

  #hold(rentalId: string): RentalHold {
    let hold = this.#rentals.get(rentalId)
    if (hold === undefined) {
      hold = { rentalId, key: placesKey(rentalId), places: new Set(), written: 0, writtenCount: 0, unsure: false, queue: Promise.resolve(), pending: 0 }
      this.#rentals.set(rentalId, hold)
    }
    return hold
  }

  /** Runs `run` after the rental's earlier reads and writes; forgets the rental once nothing is held or pending there. */
  #serial<T>(hold: RentalHold, run: () => Promise<T>): Promise<T> {
    hold.pending++
    const result = hold.queue.then(run)
    hold.queue = result.then(
      () => this.#settled(hold),
      () => this.#settled(hold),
    )
    return result
  }

  #settled(hold: RentalHold): void {
    hold.pending--
    if (hold.pending === 0 && hold.places.size === 0 && hold.writtenCount === 0 && !hold.unsure) this.#rentals.delete(hold.rentalId)
  }
}

class KvPlace implements StreamPlace {
  held = true
  constructor(
    readonly rentalId: string,
    private readonly onLost: () => void,
    private readonly giveBack: (place: KvPlace) => void,
  ) {}

  release(): void {
    if (!this.held) return
    this.held = false
    this.giveBack(this)
  }

  /** No longer held, nothing told (the process is closing). */
  drop(): void {
    this.held = false
  }

  lose(): void {
    if (!this.held) return
    this.held = false
    this.onLost()
  }
}
