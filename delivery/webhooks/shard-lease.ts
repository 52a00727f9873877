import { randomBytes } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { crc32c, leaseTiming, LeaseKey, leaseValue, replaceFileDurably, seenAfter, type KvBucket, type KvWatcher, type LeaseTiming, type SeenLease } from '../../storage/index.js'

/**
 * Which process runs which rentals' webhook loops. Several delivery processes share the
 * `webhooks` bucket; a rental's loop must run in exactly one of them at a time, or two
 * would send its events side by side, out of order. Rentals are hashed to a fixed number
 * of shards and each shard is a lease on the key-value port (`storage/lease-key.ts`):
 * taken with `create`, or with `update` at the revision seen once its holder let it lapse
 * for the lease time on the taker's own clock; renewed every third of the lease time at
 * the holder's last revision (a refusal, or another process's write seen on the watch,
 * stops the shard's loops at once); counted on only until two thirds of the lease time
 * after the last good renewal was sent, so a holder cut off from the bucket stops its
 * loops before anyone can take the shard over; released on a clean stop with `delete` at
 * the holder's revision, after the loops have ended. A process that restarts on the same
 * DATA_DIR (one process per DATA_DIR) keeps its holder id and takes its shards back at once.
 *
 * Shards, not rentals, are leased so the writes stay bounded: with 32 shards and the
 * default 15 s lease, the renewals of the whole cluster are under 7 writes a second however
 * many rentals have webhooks. Processes share the shards evenly: each keeps a presence key
 * and holds at most its share of the shards (rounded up), releasing the rest when another
 * process joins.
 */

/** Shards rentals are hashed to. Fixed in the code: every process must agree on it. */
export const LEASE_SHARDS = 32

/** Keys the leases may use in the bucket: one per shard, and presence keys of up to 224 processes. */
export const LEASE_KEYS = LEASE_SHARDS + 224

const SHARD_KEY = 'lease.shard.'
const MEMBER_KEY = 'lease.member.'
const HOLDER_ID = /^wh_[0-9a-f]{16,64}$/

/** The shard a rental's webhook loop belongs to. */
export function shardOf(rentalId: string): number {
  return crc32c(Buffer.from(rentalId)) % LEASE_SHARDS
}

/**
 * This DATA_DIR's holder id (`DATA_DIR/webhook-holder-id`), made on first use. It is what
 * lets a restarted process take its own leases back without waiting for them to expire:
 * the data folder lock makes sure no other live process has it.
 */
export async function holderIdOf(path: string): Promise<string> {
  try {
    const text = (await readFile(path, 'utf8')).trim()
    if (HOLDER_ID.test(text)) return text
    throw new Error(`${path} does not hold a webhook holder id (wh_ and hex digits); remove it to make a new one`)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
  }
  const id = `wh_${randomBytes(8).toString('hex')}`
  await mkdir(dirname(path), { recursive: true })
  await replaceFileDurably(path, dirname(path), Buffer.from(`${id}\n`), 0o600)
  return id
}

export interface ShardLeaseOptions {
  readonly bucket: KvBucket
  readonly holderId: string
  /** How long a lease lasts without a renewal (WEBHOOK_LEASE_MS). */
  readonly leaseMs: number
  /**
   * The shards held changed: start the loops of shards gained, stop those of shards lost.
   * Awaited before a release, so it must resolve once the stopped loops have ended.
   */
  readonly onChange: () => Promise<void>
  readonly onError?: (err: unknown) => void
  /** A monotonic clock in ms (performance.now by default). */
  readonly now?: () => number
}

export class ShardLeases {
  readonly #o: ShardLeaseOptions
  readonly #now: () => number
  readonly #timing: LeaseTiming
  readonly #shards: readonly LeaseKey[]
  readonly #members = new Map<string, SeenLease>()
  readonly #preferred: number
  #watch: KvWatcher | undefined
  #watching: Promise<void> | undefined
  #timer: NodeJS.Timeout | undefined
  #fenceTimer: NodeJS.Timeout | undefined
  #round: Promise<void> | undefined
  #again = false
  #closed = false
  #writes = 0

  constructor(options: ShardLeaseOptions) {
    this.#o = options
    this.#now = options.now ?? (() => performance.now())
    this.#timing = leaseTiming(options.leaseMs)
    this.#shards = Array.from({ length: LEASE_SHARDS }, (_, shard) => new LeaseKey({
      bucket: options.bucket, key: `${SHARD_KEY}${shard}`, holderId: options.holderId, timing: this.#timing, now: this.#now,
    }))
    // Processes start their search at different shards, so joining ones rarely race for the same key.
    this.#preferred = crc32c(Buffer.from(options.holderId)) % LEASE_SHARDS
  }

  get holderId(): string {
    return this.#o.holderId
  }

  /** Follows the leases of every process, then takes this process's share. */
  async start(): Promise<void> {
    this.#follow()
    await this.#watch!.initialized
    await this.#tick()
  }

  /** Whether this process may run the loops of `shard` now. */
  holds(shard: number): boolean {
    return this.#shards[shard]?.holds() ?? false
  }

  owns(rentalId: string): boolean {
    return this.holds(shardOf(rentalId))
  }

  /** The shards held, ascending. */
  held(): number[] {
    return this.#shards.flatMap((lease, shard) => (lease.holds() ? [shard] : []))
  }

  /** Lease writes made since the start (renewals, takes, releases, presence). */
  writes(): number {
    return this.#writes
  }

  #taken(): LeaseKey[] {
    return this.#shards.filter((lease) => lease.isHeld())
  }

  #follow(): void {
    const watch = this.#o.bucket.watch({ key: 'lease.>' })
    this.#watch = watch
    this.#watching = (async () => {
      for await (const entry of watch) {
        if (entry.key.startsWith(MEMBER_KEY)) {
          const id = entry.key.slice(MEMBER_KEY.length)
          const known = this.#members.has(id)
          const seen = seenAfter(this.#members.get(id), entry, this.#now())
          if (seen.holder === null) this.#members.delete(id)
          else this.#members.set(id, seen)
          // A process joined or left: the shares change.
          if (id !== this.#o.holderId && known !== (seen.holder !== null) && entry.isUpdate) this.#kick()
          continue
        }
        const shard = Number(entry.key.slice(SHARD_KEY.length))
        if (!entry.key.startsWith(SHARD_KEY) || !Number.isInteger(shard) || shard < 0 || shard >= LEASE_SHARDS) continue
        const lease = this.#shards[shard]!
        if (lease.observe(entry)) this.#lost()
        else if (lease.seen()?.holder === null && !lease.isHeld() && entry.isUpdate) this.#kick() // released: free to take
      }
    })().catch((err: unknown) => {
      this.#o.onError?.(err)
      // Fell behind (watch_overflow) or the storage failed: follow again from the current values.
      if (!this.#closed) setTimeout(() => this.#closed || this.#follow(), this.#timing.renewMs).unref()
    })
  }

  /** Runs a round now (or right after the one under way). */
  #kick(): void {
    if (this.#closed) return
    if (this.#round !== undefined) this.#again = true
    else {
      clearTimeout(this.#timer)
      void this.#tick()
    }
  }

  async #tick(): Promise<void> {
    if (this.#closed || this.#round !== undefined) return
    this.#round = this.#renewAndBalance().catch((err: unknown) => this.#o.onError?.(err))
    await this.#round
    this.#round = undefined
    if (this.#closed) return
    const delay = this.#again ? 0 : this.#timing.renewMs
    this.#again = false
    this.#timer = setTimeout(() => void this.#tick(), delay)
    this.#timer.unref()
  }

  async #renewAndBalance(): Promise<void> {
    const { bucket, holderId } = this.#o
    this.#writes++
    await bucket.put(`${MEMBER_KEY}${holderId}`, leaseValue(holderId)).catch((err: unknown) => this.#o.onError?.(err))
    await Promise.all(
      this.#taken().map(async (lease) => {
        try {
          this.#writes++
          if ((await lease.renew()) === 'lost') this.#lost()
        } catch (err) {
          this.#o.onError?.(err) // kept until it is no longer valid: the next round tries again
        }
      }),
    )
    this.#fence()
    await this.#forgetDeadMembers()

    const now = this.#now()
    const live = 1 + [...this.#members].filter(([id, m]) => id !== holderId && now - m.seenAt < this.#timing.leaseMs).length
    const share = Math.ceil(LEASE_SHARDS / live)
    const order = Array.from({ length: LEASE_SHARDS }, (_, i) => (this.#preferred + i) % LEASE_SHARDS)
    if (this.#taken().length > share) {
      await this.#release(order.filter((s) => this.#shards[s]!.isHeld()).slice(share))
      return
    }
    let gained = false
    for (const shard of order) {
      if (this.#taken().length >= share) break
      const lease = this.#shards[shard]!
      // Free, our own from before a restart on this DATA_DIR, or one whose holder stopped renewing it.
      if (lease.isHeld() || lease.liveHolder() !== null) continue
      try {
        this.#writes++
        if (await lease.take()) gained = true
      } catch (err) {
        this.#o.onError?.(err)
      }
    }
    if (gained) {
      this.#armFence()
      await this.#o.onChange()
    }
  }

  /** Drops the shards whose last renewal is too old, stopping their loops. */
  #fence(): void {
    const stale = this.#shards.filter((lease) => lease.fence())
    if (stale.length > 0) this.#lost()
    this.#armFence()
  }

  #armFence(): void {
    clearTimeout(this.#fenceTimer)
    const until = this.#taken().map((lease) => lease.validUntil()!)
    if (this.#closed || until.length === 0) return
    this.#fenceTimer = setTimeout(() => this.#fence(), Math.max(0, Math.min(...until) - this.#now()) + 1)
    this.#fenceTimer.unref()
  }

  /** Shards another process holds now, or this one can no longer count on, were dropped: their loops stop at once. */
  #lost(): void {
    this.#o.onChange().catch((err: unknown) => this.#o.onError?.(err))
  }

  /** Stops the shards' loops, then frees them for another process. */
  async #release(shards: number[]): Promise<void> {
    const revisions = shards.map((s) => [this.#shards[s]!, this.#shards[s]!.drop()] as const)
    await this.#o.onChange()
    await Promise.all(
      revisions.map(async ([lease, revision]) => {
        if (revision === undefined) return
        this.#writes++
        await lease.free(revision).catch((err: unknown) => this.#o.onError?.(err))
      }),
    )
  }

  /** Presence keys not renewed for two lease times: their process is gone. */
  async #forgetDeadMembers(): Promise<void> {
    const now = this.#now()
    for (const [id, m] of this.#members) {
      if (id === this.#o.holderId || now - m.seenAt < 2 * this.#timing.leaseMs) continue
      this.#members.delete(id)
      this.#writes++
      await this.#o.bucket.delete(`${MEMBER_KEY}${id}`, { revision: m.revision }).catch(() => undefined)
    }
  }

  /** Stops renewing and releases every shard, after onChange has stopped their loops. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearTimeout(this.#timer)
    clearTimeout(this.#fenceTimer)
    await this.#round
    this.#watch?.stop()
    await this.#watching
    await this.#release(this.#taken().map((lease) => this.#shards.indexOf(lease)))
    await this.#o.bucket.delete(`${MEMBER_KEY}${this.#o.holderId}`).catch((err: unknown) => this.#o.onError?.(err))
  }
}
