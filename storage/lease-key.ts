import { isKvError, isRevisionRace } from './kv-store.js'
import type { KvBucket, KvEntry } from './kv-store.js'

/**
 * A lease on one key of the key-value port, as one holder sees and writes it. The rules,
 * shared by every lease built on the port (the webhook shards, the log's durable
 * consumers):
 *
 * - A free key (no value: never written, or deleted) is taken with `create`, which only
 *   one holder can do. A held key is taken over only once its lease lapsed: its revision
 *   has not changed for the lease time since this holder first saw that revision, on this
 *   holder's own monotonic clock (clocks of different machines are never compared), and
 *   the take-over is an `update` at that revision, which fails if the holder renewed
 *   meanwhile. A key that names this holder itself (a restart under the same holder id)
 *   is taken back at once.
 * - The holder renews every third of the lease time with `update` at its last revision.
 *   A renewal refused for its revision, or a newer revision by anyone else, means the
 *   lease is lost.
 * - The holder counts on its lease only until two thirds of the lease time after its
 *   last good renewal was sent. A taker waits the whole lease time from a revision it
 *   saw only after that renewal was written, so the holder has stopped a third of the
 *   lease time before anyone can take over, however its renewals fail.
 * - A clean stop deletes the key at the holder's revision, so another holder can take it
 *   at once.
 *
 * The value names the holder (`{"holder": ..., "renewed_at": ...}`); `renewed_at` is for
 * people reading the bucket, never compared.
 */

export interface LeaseTiming {
  /** How long a lease lasts without a renewal, judged by a taker on its own clock. */
  readonly leaseMs: number
  /** How often the holder renews: a third of the lease time. */
  readonly renewMs: number
  /** How long after sending a renewal the holder counts on it: the lease time less one renewal period. */
  readonly validMs: number
}

export function leaseTiming(leaseMs: number): LeaseTiming {
  if (!Number.isSafeInteger(leaseMs) || leaseMs < 3) throw new RangeError('a lease time must be an integer of at least 3 ms')
  const renewMs = Math.max(1, Math.floor(leaseMs / 3))
  return { leaseMs, renewMs, validMs: leaseMs - renewMs }
}

/** What a holder saw of a key: whose it was, at which revision, and since when on its own clock. */
export interface SeenLease {
  /** Null when the key has no value (or a value that names no holder). */
  readonly holder: string | null
  readonly revision: number
  /** When this holder first saw this revision. */
  readonly seenAt: number
}

/**
 * `entry` as seen now, after `before`. A revision seen again unchanged (a watch that
 * started over) keeps the time it was first seen: its lapse runs on.
 */
export function seenAfter(before: SeenLease | undefined, entry: Pick<KvEntry, 'value' | 'revision' | 'operation'>, now: number): SeenLease {
  const holder = entry.operation === 'DEL' ? null : leaseHolderOf(entry.value)
  return { holder, revision: entry.revision, seenAt: before?.revision === entry.revision ? before.seenAt : now }
}

export function leaseValue(holder: string): Uint8Array {
  return Buffer.from(JSON.stringify({ holder, renewed_at: new Date().toISOString() }))
}

export function leaseHolderOf(value: Uint8Array): string | null {
  try {
    const holder = (JSON.parse(Buffer.from(value).toString('utf8')) as { holder?: unknown }).holder
    return typeof holder === 'string' ? holder : null
  } catch {
    return null
  }
}

export interface LeaseKeyOptions {
  readonly bucket: KvBucket
  readonly key: string
  readonly holderId: string
  readonly timing: LeaseTiming
  /** A monotonic clock in ms. */
  readonly now: () => number
}

interface Held {
  readonly revision: number
  /** Past this the holder no longer counts on the lease. */
  readonly validUntil: number
}

export class LeaseKey {
  readonly key: string
  readonly #o: LeaseKeyOptions
  #seen: SeenLease | undefined
  #held: Held | undefined

  constructor(options: LeaseKeyOptions) {
    this.#o = options
    this.key = options.key
  }

  /** What was last seen of the key, undefined before anything was. */
  seen(): SeenLease | undefined {
    return this.#seen
  }

  /**
   * Takes in a change of the key (from a watch). True when it shows the lease taken from
   * this holder (a newer revision that is not its own): the holder must stop at once.
   */
  observe(entry: Pick<KvEntry, 'value' | 'revision' | 'operation'>): boolean {
    if (this.#seen !== undefined && entry.revision < this.#seen.revision) return false
    this.#seen = seenAfter(this.#seen, entry, this.#o.now())
    if (this.#held !== undefined && entry.revision > this.#held.revision && this.#seen.holder !== this.#o.holderId) {
      this.#held = undefined
      return true
    }
    return false
  }

  /** Whether this holder has taken the lease and not let it go, valid or not. */
  isHeld(): boolean {
    return this.#held !== undefined
  }

  /** Whether this holder may act on the lease now. */
  holds(): boolean {
    return this.#held !== undefined && this.#o.now() < this.#held.validUntil
  }

  /** When this holder stops counting on its lease (undefined when not held). */
  validUntil(): number | undefined {
    return this.#held?.validUntil
  }

  /** Another holder whose lease has not lapsed on this clock, or null if the key may be taken now. */
  liveHolder(): SeenLease | null {
    const seen = this.#seen
    if (seen === undefined || seen.holder === null || seen.holder === this.#o.holderId) return null
    return this.#o.now() - seen.seenAt < this.#o.timing.leaseMs ? seen : null
  }

  /** When the live holder's lease lapses on this clock (now if none). */
  lapsesAt(): number {
    const live = this.liveHolder()
    return live === null ? this.#o.now() : live.seenAt + this.#o.timing.leaseMs
  }

  /**
   * Takes the lease if it may be taken now (free, this holder's own, or lapsed): true when
   * taken, false when another holder has it or won the race. Other failures throw.
   */
  async take(): Promise<boolean> {
    if (this.#held !== undefined) return true
    if (this.liveHolder() !== null) return false
    const { bucket, key, holderId } = this.#o
    const seen = this.#seen
    const sentAt = this.#o.now()
    try {
      const revision = seen === undefined || seen.holder === null
        ? await bucket.create(key, leaseValue(holderId))
        : await bucket.update(key, leaseValue(holderId), seen.revision)
      this.#held = { revision, validUntil: sentAt + this.#o.timing.validMs }
      if (this.#seen === undefined || this.#seen.revision < revision) this.#seen = { holder: holderId, revision, seenAt: sentAt }
      return true
    } catch (err) {
      if (isRevisionRace(err)) return false
      throw err
    }
  }

  /**
   * Renews the lease at this holder's last revision: 'lost' when refused for its revision
   * (another holder has it). Other failures throw and keep the lease until it is no
   * longer valid.
   */
  async renew(): Promise<'renewed' | 'lost' | 'released'> {
    const held = this.#held
    if (held === undefined) return 'released'
    const sentAt = this.#o.now()
    try {
      const revision = await this.#o.bucket.update(this.#o.key, leaseValue(this.#o.holderId), held.revision)
      if (this.#held !== held) return this.#held === undefined ? 'released' : 'renewed'
      this.#held = { revision, validUntil: sentAt + this.#o.timing.validMs }
      return 'renewed'
    } catch (err) {
      if (!isKvError(err, 'wrong_revision')) throw err
      if (this.#held === held) this.#held = undefined
      return 'lost'
    }
  }

  /** Drops the lease if its validity ran out on this clock; true when it did. */
  fence(): boolean {
    if (this.#held === undefined || this.#o.now() < this.#held.validUntil) return false
    this.#held = undefined
    return true
  }

  /** Lets the lease go without a write; the revision to free it at, if it was held. */
  drop(): number | undefined {
    const revision = this.#held?.revision
    this.#held = undefined
    return revision
  }

  /** Deletes the key if it still holds `revision` (this holder's last write); another holder's later write stays. */
  async free(revision: number): Promise<void> {
    await this.#o.bucket.delete(this.#o.key, { revision }).catch((err: unknown) => {
      if (!isKvError(err, 'wrong_revision')) throw err
    })
  }
}
