import { randomBytes } from 'node:crypto'
import { mkdir, readFile } from 'node:fs/promises'
import { dirname } from 'node:path'
import { crc32c, isKvError, replaceFileDurably, type KvBucket, type KvWatcher } from '../../storage/index.js'

/**
 * Which process runs which rentals' webhook loops. Several delivery processes share the
 * `webhooks` bucket; a rental's loop must run in exactly one of them at a time, or two
 * would send its events side by side, out of order. Rentals are hashed to a fixed number
 * of shards and each shard is leased on the key-value port:
 *
 * - taken with `create` (the key has no value) or, once its holder let it expire, with
 *   `update` at the revision that was seen expiring;
 * - renewed every third of the lease time with `update` at the holder's last revision: a
 *   renewal refused for its revision means another process holds the shard, and the loops
 *   stop at once;
 * - released on a clean stop with `delete` at that revision, after the loops have ended.
 *
 * Expiry is judged on each process's own monotonic clock, never by comparing wall clocks
 * across machines: a lease is expired once its revision has not changed for the lease time
 * since this process saw it. The holder stops its loops when its last successful renewal
 * was sent more than two thirds of the lease time ago, so it has stopped before anyone can
 * have seen the lease expire. A process that restarts on the same DATA_DIR (one process
 * per DATA_DIR) keeps its holder id and takes its shards back at once.
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

interface Seen {
  /** Null once deleted. */
  readonly holder: string | null
  readonly revision: number
  /** When this process saw this revision first. */
  readonly seenAt: number
}

interface Held {
  readonly revision: number
  /** Past this the holder no longer counts on the lease: its last good renewal was sent validMs before. */
  readonly validUntil: number
}

const encode = (holder: string) => Buffer.from(JSON.stringify({ holder, renewed_at: new Date().toISOString() }))

export class ShardLeases {
  readonly #o: ShardLeaseOptions
  readonly #now: () => number
  readonly #renewMs: number
  readonly #validMs: number
  readonly #held = new Map<number, Held>()
  readonly #shards = new Map<number, Seen>()
  readonly #members = new Map<string, Seen>()
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
    this.#renewMs = Math.max(1, Math.floor(options.leaseMs / 3))
    this.#validMs = options.leaseMs - this.#renewMs
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
    const held = this.#held.get(shard)
    return held !== undefined && this.#now() < held.validUntil
  }

  owns(rentalId: string): boolean {
    return this.holds(shardOf(rentalId))
  }

  /** The shards held, ascending. */
  held(): number[] {
    return [...this.#held.keys()].filter((s) => this.holds(s)).sort((a, b) => a - b)
  }

  /** Lease writes made since the start (renewals, takes, releases, presence). */
  writes(): number {
    return this.#writes
  }

  #follow(): void {
    const watch = this.#o.bucket.watch({ key: 'lease.>' })
    this.#watch = watch
    this.#watching = (async () => {
      for await (const entry of watch) {
        const holder = entry.operation === 'DEL' ? null : holderOf(entry.value)
        // A value seen again unchanged (the watch started over) keeps the time it was first seen: its expiry runs on.
        const before = entry.key.startsWith(MEMBER_KEY) ? this.#members.get(entry.key.slice(MEMBER_KEY.length)) : this.#shards.get(Number(entry.key.slice(SHARD_KEY.length)))
        const seen: Seen = { holder, revision: entry.revision, seenAt: before?.revision === entry.revision ? before.seenAt : this.#now() }
        if (entry.key.startsWith(MEMBER_KEY)) {
          const id = entry.key.slice(MEMBER_KEY.length)
          const known = this.#members.has(id)
          if (seen.holder === null) this.#members.delete(id)
          else this.#members.set(id, seen)
          // A process joined or left: the shares change.
          if (id !== this.#o.holderId && known !== (seen.holder !== null) && entry.isUpdate) this.#kick()
          continue
        }
        const shard = Number(entry.key.slice(SHARD_KEY.length))
        if (!entry.key.startsWith(SHARD_KEY) || !Number.isInteger(shard) || shard < 0 || shard >= LEASE_SHARDS) continue
        this.#shards.set(shard, seen)
        const mine = this.#held.get(shard)
        if (mine !== undefined && entry.revision > mine.revision && seen.holder !== this.#o.holderId) this.#lose([shard])
        else if (seen.holder === null && mine === undefined && entry.isUpdate) this.#kick() // released: free to take
      }
    })().catch((err: unknown) => {
      this.#o.onError?.(err)
      // Fell behind (watch_overflow) or the storage failed: follow again from the current values.
      if (!this.#closed) setTimeout(() => this.#closed || this.#follow(), this.#renewMs).unref()
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
    const delay = this.#again ? 0 : this.#renewMs
    this.#again = false
    this.#timer = setTimeout(() => void this.#tick(), delay)
    this.#timer.unref()
  }

  async #renewAndBalance(): Promise<void> {
    const { bucket, holderId } = this.#o
    this.#writes++
    await bucket.put(`${MEMBER_KEY}${holderId}`, encode(holderId)).catch((err: unknown) => this.#o.onError?.(err))
    await Promise.all(
      [...this.#held].map(async ([shard, held]) => {
        const sentAt = this.#now()
        try {
          this.#writes++
          const revision = await bucket.update(`${SHARD_KEY}${shard}`, encode(holderId), held.revision)
          if (this.#held.get(shard) === held) this.#held.set(shard, { revision, validUntil: sentAt + this.#validMs })
        } catch (err) {
          if (isKvError(err, 'wrong_revision')) this.#lose([shard])
          else this.#o.onError?.(err) // kept until it is no longer valid: the next round tries again
        }
      }),
    )
    this.#fence()
    await this.#forgetDeadMembers()

    const now = this.#now()
    const live = 1 + [...this.#members].filter(([id, m]) => id !== holderId && now - m.seenAt < this.#o.leaseMs).length
    const share = Math.ceil(LEASE_SHARDS / live)
    const order = Array.from({ length: LEASE_SHARDS }, (_, i) => (this.#preferred + i) % LEASE_SHARDS)
    if (this.#held.size > share) {
      await this.#release(order.filter((s) => this.#held.has(s)).slice(share))
      return
    }
    let gained = false
    for (const shard of order) {
      if (this.#held.size >= share) break
      if (this.#held.has(shard)) continue
      const seen = this.#shards.get(shard)
      const free = seen === undefined || seen.holder === null
      // Our own, from before a restart on this DATA_DIR, or one whose holder stopped renewing it.
      if (!free && seen.holder !== holderId && now - seen.seenAt < this.#o.leaseMs) continue
      const sentAt = this.#now()
      try {
        this.#writes++
        const revision = free ? await bucket.create(`${SHARD_KEY}${shard}`, encode(holderId)) : await bucket.update(`${SHARD_KEY}${shard}`, encode(holderId), seen.revision)
        this.#held.set(shard, { revision, validUntil: sentAt + this.#validMs })
        gained = true
      } catch (err) {
        if (!isKvError(err, 'exists') && !isKvError(err, 'wrong_revision')) this.#o.onError?.(err)
      }
    }
    if (gained) {
      this.#armFence()
      await this.#o.onChange()
    }
  }

  /** Drops the shards whose last renewal is too old, stopping their loops. */
  #fence(): void {
    const now = this.#now()
    const stale = [...this.#held].filter(([, h]) => now >= h.validUntil).map(([s]) => s)
    if (stale.length > 0) this.#lose(stale)
    this.#armFence()
  }

  #armFence(): void {
    clearTimeout(this.#fenceTimer)
    if (this.#closed || this.#held.size === 0) return
    const first = Math.min(...[...this.#held.values()].map((h) => h.validUntil))
    this.#fenceTimer = setTimeout(() => this.#fence(), Math.max(0, first - this.#now()) + 1)
    this.#fenceTimer.unref()
  }

  /** Shards another process holds now, or this one can no longer count on: their loops stop at once. */
  #lose(shards: number[]): void {
    for (const s of shards) this.#held.delete(s)
    this.#o.onChange().catch((err: unknown) => this.#o.onError?.(err))
  }

  /** Stops the shards' loops, then frees them for another process. */
  async #release(shards: number[]): Promise<void> {
    const revisions = shards.map((s) => [s, this.#held.get(s)?.revision] as const)
    for (const s of shards) this.#held.delete(s)
    await this.#o.onChange()
    await Promise.all(
      revisions.map(async ([s, revision]) => {
        if (revision === undefined) return
        this.#writes++
        await this.#o.bucket.delete(`${SHARD_KEY}${s}`, { revision }).catch((err: unknown) => {
          if (!isKvError(err, 'wrong_revision')) this.#o.onError?.(err)
        })
      }),
    )
  }

  /** Presence keys not renewed for two lease times: their process is gone. */
  async #forgetDeadMembers(): Promise<void> {
    const now = this.#now()
    for (const [id, m] of this.#members) {
      if (id === this.#o.holderId || now - m.seenAt < 2 * this.#o.leaseMs) continue
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
    await this.#release([...this.#held.keys()])
    await this.#o.bucket.delete(`${MEMBER_KEY}${this.#o.holderId}`).catch((err: unknown) => this.#o.onError?.(err))
  }
}

function holderOf(value: Uint8Array): string | null {
  try {
    const holder = (JSON.parse(Buffer.from(value).toString('utf8')) as { holder?: unknown }).holder
    return typeof holder === 'string' ? holder : null
  } catch {
    return null
  }
}
