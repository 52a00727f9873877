import { jetstream, StorageType, type JetStreamClient } from '@nats-io/jetstream'
import { Kvm, type KV } from '@nats-io/kv'
import { headers, type NatsConnection } from '@nats-io/transport-node'
import {
  checkKey,
  checkLimits,
  checkRevision,
  KV_LIMITS,
  KvError,
  type KvBucket,
  type KvBucketLimits,
  type KvBucketStatus,
  type KvEntry,
  type KvWatcher,
  type KvWatchOptions,
} from '../kv-store.js'
import { KvWatchQueue } from '../kv-watch-queue.js'
import { toKvError } from './nats-kv-errors.js'
import { KvFeed } from './nats-kv-feed.js'
import { LiveKeys } from './nats-kv-keys.js'

/**
 * Bytes of headers a write carries besides its value (the expected revision, the
 * deletion mark): the server counts them against the stream's max_msg_size.
 */
const HEADER_ROOM = 1024
/** An unconditional delete re-reads and retries this often while other writers keep changing the key. */
const DELETE_ATTEMPTS = 8
const DEFAULT_TIMEOUT_MS = 5000

export interface NatsKvOptions {
  /** Copies of each bucket's stream: 1 (the default) on a single server, 3 in a cluster for durability. */
  readonly replicas?: number
  /** Milliseconds a request waits for JetStream before failing with `unavailable` (default 5000). */
  readonly timeoutMs?: number
  /**
   * Changes a watch holds for a consumer that does not take them before it ends with
   * `watch_overflow` (default and most KV_LIMITS.watchBacklog): smaller only where a
   * test must overflow a watch without writing a hundred thousand changes.
   */
  readonly watchBacklog?: number
}

/**
 * A bucket on NATS KV (JetStream stream `KV_<name>`): file storage, one message per key
 * (history 1), discard new. Revisions are the stream's sequence. Each write is one
 * publish with the expectation the operation needs (`Nats-Expected-Last-Subject-Sequence`),
 * so the server decides create and update races, between processes too.
 *
 * Durability differs from the file adapter: on nats-server 2.9 an acknowledged write of
 * an R1 stream is written to the operating system, not fsynced (2.9 has no
 * `sync_interval`), so a power cut can lose it while `kill -9` of the server cannot.
 * Durability on NATS is replication: open the buckets with `replicas: 3` on a cluster,
 * where an acknowledgement means a majority of the servers hold the write.
 *
 * Deletions are markers the stream keeps (history 1 keeps the latest message of each
 * key, the marker for a deleted key): nothing removes them, so a resumed watch misses
 * no deletion; a bucket of ever-new keys grows by one marker per deleted key.
 */
export class NatsKvBucket implements KvBucket {
  readonly name: string
  readonly #nc: NatsConnection
  readonly #js: JetStreamClient
  readonly #kv: KV
  readonly #limits: KvBucketLimits
  readonly #keys: LiveKeys
  readonly #index: KvFeed
  readonly #watchers = new Set<KvWatchQueue>()
  readonly #pending = new Set<Promise<unknown>>()
  readonly #timeoutMs: number
  readonly #watchBacklog: number
  #closing: Promise<void> | undefined

  private constructor(name: string, nc: NatsConnection, js: JetStreamClient, kv: KV, limits: KvBucketLimits, keys: LiveKeys, index: KvFeed, options: NatsKvOptions) {
    this.name = name
    this.#nc = nc
    this.#js = js
    this.#kv = kv
    this.#limits = limits
    this.#keys = keys
    this.#index = index
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
    this.#watchBacklog = Math.min(options.watchBacklog ?? KV_LIMITS.watchBacklog, KV_LIMITS.watchBacklog)
  }

  static async open(nc: NatsConnection, name: string, limits: KvBucketLimits, options: NatsKvOptions = {}): Promise<NatsKvBucket> {
    if (!KV_LIMITS.bucketName.test(name)) throw new KvError('invalid_argument', `bucket name must match ${KV_LIMITS.bucketName}`)
    checkLimits(limits)
    const replicas = options.replicas ?? 1
    if (replicas !== 1 && replicas !== 3 && replicas !== 5) throw new KvError('invalid_argument', 'replicas must be 1, 3 or 5')
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS
    const js = jetstream(nc, { timeout: timeoutMs })
    let kv: KV
    try {
      // Reads go to the stream leader (no direct get): a follower answering a read could miss a write just acknowledged.
      kv = await new Kvm(js).create(name, {
        history: 1,
        replicas,
        storage: StorageType.File,
        maxValueSize: limits.maxValueBytes + HEADER_ROOM,
        allow_direct: false,
        timeout: timeoutMs,
      })
      // An existing bucket keeps its settings; the value size follows the limits it is opened with.
      const jsm = await js.jetstreamManager()
      const info = await jsm.streams.info(`KV_${name}`)
      if (info.config.max_msg_size !== limits.maxValueBytes + HEADER_ROOM) {
        await jsm.streams.update(`KV_${name}`, { ...info.config, max_msg_size: limits.maxValueBytes + HEADER_ROOM })
      }
    } catch (err) {
      throw toKvError(err, `opening kv bucket ${name}`)
    }
    const keys = new LiveKeys()
    let loaded: () => void = () => undefined
    let failed: (err: KvError) => void = () => undefined
    const ready = new Promise<void>((resolve, reject) => {
      loaded = resolve
      failed = reject
    })
    const index = new KvFeed(
      { nc, js, bucket: name, key: undefined, include: 'last_values', headersOnly: true },
      { current: (e) => keys.fed(e), change: (e) => keys.fed(e), currentDone: () => loaded(), failed: (err) => failed(err) },
    )
    const timer = setTimeout(() => failed(new KvError('unavailable', `opening kv bucket ${name}: its keys did not load in ${timeoutMs} ms`)), timeoutMs)
    try {
      await ready
    } catch (err) {
      index.stop()
      throw err
    } finally {
      clearTimeout(timer)
    }
    return new NatsKvBucket(name, nc, js, kv, limits, keys, index, options)
  }

  get(key: string): Promise<KvEntry | null> {
    return this.#run(async () => {
      checkKey(key)
      const e = await this.#kv.get(key).catch((err: unknown) => {
        throw toKvError(err, `get ${key} from kv bucket ${this.name}`)
      })
      if (e === null || e.operation !== 'PUT') return null
      return { bucket: this.name, key, value: e.value, revision: e.revision, created: e.created.getTime(), operation: 'PUT' }
    })
  }

  create(key: string, value: Uint8Array): Promise<number> {
    return this.#run(() => {
      this.#checkWrite(key, value)
      return this.#writeKey(key, () => this.#kv.create(key, value), 'exists')
    })
  }

  update(key: string, value: Uint8Array, revision: number): Promise<number> {
    return this.#run(async () => {
      this.#checkWrite(key, value)
      checkRevision(revision)
      await this.#requireValueAt(key, revision)
      try {
        const r = await this.#kv.update(key, value, revision)
        this.#keys.wrote(key, r, 'PUT')
        return r
      } catch (err) {
        throw toKvError(err, `update of ${key} in kv bucket ${this.name}`, 'wrong_revision')
      }
    })
  }

  put(key: string, value: Uint8Array): Promise<number> {
    return this.#run(() => {
      this.#checkWrite(key, value)
      return this.#writeKey(key, () => this.#kv.put(key, value))
    })
  }

  delete(key: string, options?: { readonly revision?: number }): Promise<void> {
    const revision = options?.revision
    return this.#run(async () => {
      checkKey(key)
      if (revision !== undefined) checkRevision(revision)
      if (revision !== undefined) {
        await this.#requireValueAt(key, revision)
        await this.#deleteAt(key, revision, 'wrong_revision')
        return
      }
      // Only a value is deleted (a key without one gets no marker and no revision): the
      // marker is written on the revision read, and read again if another writer got between.
      let held = this.#keys.revisionOf(key)
      for (let attempt = 0; attempt < DELETE_ATTEMPTS; attempt++) {
        held ??= (await this.get(key))?.revision
        if (held === undefined) return
        if (await this.#deleteAt(key, held, undefined)) return
        held = undefined
      }
      throw new KvError('unavailable', `delete of ${key} in kv bucket ${this.name}: the key kept changing under ${DELETE_ATTEMPTS} attempts`)
    })
  }

  watch(options: KvWatchOptions = {}): KvWatcher {
    if (options.key !== undefined && options.key !== '>') checkKey(options.key.endsWith('.>') ? options.key.slice(0, -2) : options.key)
    this.#checkOpen()
    let feed: KvFeed | undefined
    const queue = new KvWatchQueue(
      options.key,
      [],
      (q) => {
        this.#watchers.delete(q)
        feed?.stop()
      },
      { currentToCome: options.include !== 'updates_only', backlog: this.#watchBacklog },
    )
    this.#watchers.add(queue)
    feed = new KvFeed(
      { nc: this.#nc, js: this.#js, bucket: this.name, key: options.key, include: options.include ?? 'last_values', after: this.#keys.latest },
      { current: (e) => queue.offerCurrent(e), currentDone: () => queue.currentDone(), change: (e) => queue.offer(e), failed: (err) => queue.fail(err) },
    )
    return queue
  }

  status(): Promise<KvBucketStatus> {
    return this.#run(async () => {
      let revision: number
      try {
        revision = (await this.#kv.status()).streamInfo.state.last_seq
      } catch (err) {
        throw toKvError(err, `status of kv bucket ${this.name}`)
      }
      // Counted once the index holds every change up to that revision, the other processes' included.
      let timer: NodeJS.Timeout | undefined
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new KvError('unavailable', `status of kv bucket ${this.name}: its watch is behind`)), this.#timeoutMs)
      })
      try {
        await Promise.race([this.#keys.caughtUp(revision), late])
      } finally {
        clearTimeout(timer)
      }
      return { bucket: this.name, values: this.#keys.size, revision }
    })
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await Promise.allSettled([...this.#pending])
      for (const w of [...this.#watchers]) w.end()
      this.#index.stop()
    })()
    return this.#closing
  }

  #checkOpen(): void {
    if (this.#closing !== undefined) throw new KvError('closed', `kv bucket ${this.name} is closed`)
  }

  #checkWrite(key: string, value: Uint8Array): void {
    checkKey(key)
    if (!(value instanceof Uint8Array)) throw new KvError('invalid_argument', 'a value must be a Uint8Array')
    if (value.length > this.#limits.maxValueBytes) throw new KvError('value_too_large', `a value of ${value.length} bytes exceeds the bucket's ${this.#limits.maxValueBytes}`)
  }

  /** Runs an operation unless the bucket is closed, and keeps it for `close` to wait on; what it throws rejects. */
  #run<T>(op: () => Promise<T>): Promise<T> {
    let p: Promise<T>
    try {
      this.#checkOpen()
      p = op()
    } catch (err) {
      return Promise.reject(err)
    }
    this.#pending.add(p)
    const forget = () => void this.#pending.delete(p)
    p.then(forget, forget)
    return p
  }

  /** A create or put: a new key needs a place under maxKeys while it is written. */
  async #writeKey(key: string, write: () => Promise<number>, onWrongSequence?: 'exists'): Promise<number> {
    const release = this.#keys.reserve(key, this.#limits.maxKeys, this.name)
    try {
      const r = await write()
      this.#keys.wrote(key, r, 'PUT')
      return r
    } catch (err) {
      throw toKvError(err, `write of ${key} to kv bucket ${this.name}`, onWrongSequence)
    } finally {
      release()
    }
  }

  /**
   * Throws `wrong_revision` unless `revision` is a value of `key`. The server checks only
   * that the key's last message has that sequence, and a deletion marker is a message
   * too: without this, an update or delete naming the marker's revision would write to a
   * deleted key. What message `revision` is never changes, so the check and the write
   * need not be one step: the write's own expectation settles whether it is still current.
   */
  async #requireValueAt(key: string, revision: number): Promise<void> {
    if (this.#keys.revisionOf(key) === revision) return
    let entry
    try {
      entry = await this.#kv.get(key, { revision })
    } catch (err) {
      throw toKvError(err, `read of ${key} in kv bucket ${this.name}`)
    }
    if (entry === null || entry.key !== key || entry.operation !== 'PUT') {
      throw new KvError('wrong_revision', `key ${key} holds no value at revision ${revision}`)
    }
  }

  /** Writes the deletion marker if the key is still at `revision`; false if it is not and `onWrongSequence` is undefined. */
  async #deleteAt(key: string, revision: number, onWrongSequence: 'wrong_revision' | undefined): Promise<boolean> {
    const h = headers()
    h.set('KV-Operation', 'DEL')
    try {
      const ack = await this.#js.publish(`$KV.${this.name}.${key}`, undefined, { headers: h, expect: { lastSubjectSequence: revision } })
      this.#keys.wrote(key, ack.seq, 'DEL')
      return true
    } catch (err) {
      const failure = toKvError(err, `delete of ${key} in kv bucket ${this.name}`, 'wrong_revision')
      if (failure.code === 'wrong_revision' && onWrongSequence === undefined) return false
      throw failure
    }
  }
}
