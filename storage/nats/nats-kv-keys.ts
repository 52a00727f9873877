import { KvError, type KvEntry } from '../kv-store.js'

/** Deletions remembered past the feed's position are dropped once this many pile up. */
const DELETED_PRUNE_AT = 1024

/**
 * The keys of a bucket that hold a value, as this process knows them, with the revision
 * of each value: fed by a headers-only watch of the whole bucket (the other processes'
 * changes, a watch latency late) and by this process's own writes as they resolve (at
 * once). A change is taken only if newer than what is held for its key, so the same
 * change seen twice (a write's answer, then the watch) or late changes nothing; a key
 * this process deleted is remembered with the deletion's revision until the watch has
 * passed it, so the watch's older entry for that key cannot bring it back.
 *
 * It serves `maxKeys` (NATS 2.9 has no limit on the number of keys; see `reserve`) and
 * the `values` of `status()`, and lets an update or a delete by revision skip a read
 * when the revision is that of the value held.
 */
export class LiveKeys {
  readonly #live = new Map<string, number>()
  readonly #deleted = new Map<string, number>()
  /** New keys this process is writing, with how many writes of each are under way. */
  readonly #reserved = new Map<string, number>()
  #seen = 0
  #wrote = 0
  #waiters: { revision: number; resolve: () => void }[] = []

  /** The latest revision this process knows of: the watch's position or its own last write. */
  get latest(): number {
    return Math.max(this.#seen, this.#wrote)
  }

  get size(): number {
    return this.#live.size
  }

  /** The revision of the key's value, if it holds one as far as this process knows. */
  revisionOf(key: string): number | undefined {
    return this.#live.get(key)
  }

  /** A write of this process resolved with `revision`. */
  wrote(key: string, revision: number, operation: 'PUT' | 'DEL'): void {
    if (revision > this.#wrote) this.#wrote = revision
    if (!this.#apply(key, revision, operation)) return
    if (operation === 'DEL' && revision > this.#seen) this.#deleted.set(key, revision)
  }

  /** A change (or current value) the watch handed on, in revision order. */
  fed(entry: KvEntry): void {
    // A newer change replaces a remembered deletion in #apply; the deletion's own entry ends it here.
    if (!this.#apply(entry.key, entry.revision, entry.operation) && this.#deleted.get(entry.key) === entry.revision) this.#deleted.delete(entry.key)
    this.#seen = entry.revision
    if (this.#deleted.size > DELETED_PRUNE_AT) for (const [k, r] of this.#deleted) if (r <= this.#seen) this.#deleted.delete(k)
    if (this.#waiters.length > 0 && this.#waiters.some((w) => w.revision <= this.#seen)) {
      const due = this.#waiters.filter((w) => w.revision <= this.#seen)
      this.#waiters = this.#waiters.filter((w) => w.revision > this.#seen)
      for (const w of due) w.resolve()
    }
  }

  /**
   * Claims a place for a write of `key` (nothing if the key holds a value), or throws
   * `bucket_full` when the keys holding a value plus the new keys being written reach
   * `maxKeys`. Call the returned function once the write has resolved (and `wrote` was
   * called) or failed.
   *
   * Exact within one process; across processes it can be exceeded: two processes that
   * each see room for one more key can both write a new one before either's watch brings
   * the other's, so a bucket can hold up to maxKeys plus the new keys written at once by
   * the other processes within one watch latency (about a millisecond). A key another
   * process just created and this one has not seen yet is taken for a new one (refused
   * when full although it exists). NATS 2.9 cannot enforce it exactly: a stream's
   * max_msgs counts the deletion markers too, and removing the markers would let a watch
   * resumed after an outage miss deletions.
   */
  reserve(key: string, maxKeys: number, bucket: string): () => void {
    if (this.#live.has(key)) return () => undefined
    const held = this.#reserved.get(key)
    if (held === undefined && this.#live.size + this.#reserved.size >= maxKeys) {
      throw new KvError('bucket_full', `bucket ${bucket} holds its ${maxKeys} keys`)
    }
    this.#reserved.set(key, (held ?? 0) + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const n = (this.#reserved.get(key) ?? 1) - 1
      if (n === 0) this.#reserved.delete(key)
      else this.#reserved.set(key, n)
    }
  }

  /** Resolves once the watch has handed on `revision` (or a later one). */
  caughtUp(revision: number): Promise<void> {
    if (this.#seen >= revision) return Promise.resolve()
    return new Promise((resolve) => this.#waiters.push({ revision, resolve }))
  }

  /** Takes a change if newer than what is held for the key; whether it was. */
  #apply(key: string, revision: number, operation: 'PUT' | 'DEL'): boolean {
    const held = this.#live.get(key) ?? this.#deleted.get(key) ?? 0
    if (revision <= held) return false
    if (operation === 'DEL') this.#live.delete(key)
    else this.#live.set(key, revision)
    this.#deleted.delete(key)
    return true
  }
}
