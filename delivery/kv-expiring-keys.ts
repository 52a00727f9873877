import { isKvError, type KvBucket, type KvEntry, type KvWatcher } from '../storage/index.js'

/** After a watch ends (fell behind, bucket briefly away): when to watch again. */
const REWATCH_MS = 1000

export interface KvExpiringKeysOptions {
  readonly bucket: KvBucket
  /** The keys to follow: a prefix ending in `.>`, or undefined for every key of the bucket. */
  readonly key?: string
  /** The time (ms) after which a value may be deleted; 0 for a value that holds none, deleted by the next sweep. */
  readonly expiryOf: (entry: KvEntry) => number
  /** Names the keys in warnings ("stream tickets"). */
  readonly what: string
  readonly onWarning: (message: string, err?: unknown) => void
}

interface Held {
  readonly revision: number
  readonly expiresAt: number
}

/**
 * Keys of a bucket that expire, for a port without per-key TTL: every process keeps an
 * index of them (its watch) and deletes the expired ones, each with the revision it saw,
 * so that sweeps of several processes never collide with a write made meanwhile (a newer
 * value is kept, and swept when it expires in turn).
 */
export class KvExpiringKeys {
  readonly #o: KvExpiringKeysOptions
  /** Every followed key with its revision and expiry, as the watch reports them. */
  readonly #index = new Map<string, Held>()
  #watcher: KvWatcher | undefined
  #watching: Promise<void> | undefined
  #closed = false

  private constructor(o: KvExpiringKeysOptions) {
    this.#o = o
  }

  /** Resolves once the keys the bucket holds are indexed. */
  static async open(o: KvExpiringKeysOptions): Promise<KvExpiringKeys> {
    const keys = new KvExpiringKeys(o)
    await keys.#watch()
    return keys
  }

  /** Keys held, expired ones not yet swept included. */
  get size(): number {
    return this.#index.size
  }

  /** Deletes the keys expired at `now`; returns how many this call deleted. */
  async sweep(now: number): Promise<number> {
    let deleted = 0
    for (const [key, held] of [...this.#index]) {
      if (held.expiresAt > now || this.#closed) continue
      try {
        await this.#o.bucket.delete(key, { revision: held.revision })
        deleted++
      } catch (err) {
        // Written, taken or swept meanwhile by this or another process.
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
    return deleted
  }

  async close(): Promise<void> {
    this.#closed = true
    this.#watcher?.stop()
    await this.#watching
  }

  async #watch(): Promise<void> {
    const watcher = this.#o.bucket.watch(this.#o.key === undefined ? {} : { key: this.#o.key })
    this.#watcher = watcher
    this.#watching = (async () => {
      try {
        for await (const entry of watcher) {
          if (entry.operation === 'DEL') {
            if ((this.#index.get(entry.key)?.revision ?? 0) <= entry.revision) this.#index.delete(entry.key)
            continue
          }
          this.#index.set(entry.key, { revision: entry.revision, expiresAt: this.#o.expiryOf(entry) })
        }
      } catch (err) {
        if (this.#closed) return
        // Fell behind (watch_overflow) or lost the bucket for a while: watch again from the current values.
        this.#o.onWarning(`${this.#o.what}: the bucket watch ended; watching again`, err)
        this.#index.clear()
        setTimeout(() => void this.#watch().catch((again: unknown) => this.#o.onWarning(`${this.#o.what}: the bucket cannot be watched`, again)), REWATCH_MS).unref()
      }
    })()
    await watcher.initialized
  }
}
