import { mkdir, open, type FileHandle } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { replaceFileDurably, syncDir, writeFully } from './durable-fs.js'
import { GroupCommit } from './group-commit.js'
import { changeBytes, encodeFrame, OP_DEL, OP_PUT, type StoredChange } from './kv-frame.js'
import { readBucketFiles, snapshotFrames, type Held } from './kv-file-state.js'
import {
  checkKey,
  checkLimits,
  checkRevision,
  keyMatches,
  KV_LIMITS,
  KvError,
  type KvBucket,
  type KvBucketLimits,
  type KvBucketStatus,
  type KvEntry,
  type KvWatcher,
  type KvWatchOptions,
  type OpenKvBucket,
} from './kv-store.js'
import { KvWatchQueue } from './kv-watch-queue.js'

/** The change log is folded into the snapshot once it outgrows the snapshot, or this. */
const LOG_MIN_BYTES = 1024 * 1024
/** Bytes of changes written in one frame (one write, one fdatasync) at most. */
const MAX_BATCH_BYTES = 4 * 1024 * 1024

export interface FileKvOptions {
  /** The folder holding one sub-folder per bucket (DATA_DIR/kv). */
  readonly dir: string
  /** Milliseconds since the epoch, stamped on each change. */
  readonly now?: () => number
  /** The bucket stopped for good (a failed fsync): the process should restart to recover it. */
  readonly onFailure?: (err: KvError) => void
  /** Something was repaired or left undone, and the bucket goes on (a torn tail cut, a compaction that failed). */
  readonly onWarning?: (message: string, err?: unknown) => void
}

type Operation =
  | { readonly kind: 'create' | 'put'; readonly key: string; readonly value: Uint8Array }
  | { readonly kind: 'update'; readonly key: string; readonly value: Uint8Array; readonly revision: number }
  | { readonly kind: 'delete'; readonly key: string; readonly revision: number | undefined }

/** What the commit decided for one operation. */
interface Pending {
  readonly op: Operation
  revision?: number
  error?: KvError
}

/** Bucket folders open in this process: a second bucket on one folder would interleave its writes. */
const openFolders = new Set<string>()

/** Buckets in sub-folders of `options.dir`. */
export function fileKvBuckets(options: FileKvOptions): OpenKvBucket {
  return (name, limits) => FileKvBucket.open(name, limits, options)
}

/**
 * A bucket on local files: `snapshot.kv` (every value, and the bucket's revision) and
 * `changes.kv` (the frames of changes since). Each group of writes is one frame, written
 * and fdatasynced before any of them resolves, so a `kill -9` or a power cut loses no
 * acknowledged write; a frame torn by a crash was never acknowledged and is cut off on
 * load. Once the change log outgrows the snapshot, the snapshot is rewritten (temporary
 * file, fsync, rename, folder fsync) and the log emptied: disk use stays proportional to
 * the values, a start reads at most about twice them. Changes whose revision the
 * snapshot already covers are skipped on load, so a crash between the rename and the
 * emptying replays nothing twice. Values are held in memory: a bucket is bounded by
 * its limits (maxKeys × maxValueBytes), and its stores keep an index of it anyway.
 */
export class FileKvBucket implements KvBucket {
  readonly name: string
  readonly #folder: string
  readonly #limits: KvBucketLimits
  readonly #options: FileKvOptions
  readonly #now: () => number
  readonly #values = new Map<string, Held>()
  readonly #watchers = new Set<KvWatchQueue>()
  readonly #commits: GroupCommit<Pending>
  #revision = 0
  #log: FileHandle | undefined
  #logBytes = 0
  #compactAt = LOG_MIN_BYTES
  #closing: Promise<void> | undefined
  #failure: KvError | undefined

  private constructor(name: string, folder: string, limits: KvBucketLimits, options: FileKvOptions) {
    this.name = name
    this.#folder = folder
    this.#limits = limits
    this.#options = options
    this.#now = options.now ?? Date.now
    this.#commits = new GroupCommit<Pending>({
      commit: (batch) => this.#commit(batch),
      sizeOf: (p) => changeBytes(Buffer.byteLength(p.op.key), p.op.kind === 'delete' ? 0 : p.op.value.length),
      maxBatchBytes: MAX_BATCH_BYTES,
    })
  }

  static async open(name: string, limits: KvBucketLimits, options: FileKvOptions): Promise<FileKvBucket> {
    if (!KV_LIMITS.bucketName.test(name)) throw new KvError('invalid_argument', `bucket name must match ${KV_LIMITS.bucketName}`)
    checkLimits(limits)
    const folder = join(options.dir, name)
    if (openFolders.has(folder)) throw new KvError('invalid_argument', `bucket ${name} is already open in ${options.dir}`)
    openFolders.add(folder)
    const bucket = new FileKvBucket(name, folder, limits, options)
    try {
      await bucket.#load()
    } catch (err) {
      await bucket.#log?.close().catch(() => undefined)
      openFolders.delete(folder)
      throw err instanceof KvError ? err : new KvError('io', `kv bucket ${name}: opening ${folder} failed`, { cause: err, transient: true })
    }
    return bucket
  }

  get #snapshotPath(): string {
    return join(this.#folder, 'snapshot.kv')
  }

  get #logPath(): string {
    return join(this.#folder, 'changes.kv')
  }

  async get(key: string): Promise<KvEntry | null> {
    checkKey(key)
    this.#checkOpen()
    const held = this.#values.get(key)
    return held === undefined ? null : this.#entry(key, held, 'PUT')
  }

  create(key: string, value: Uint8Array): Promise<number> {
    return this.#submit({ kind: 'create', key, value })
  }

  update(key: string, value: Uint8Array, revision: number): Promise<number> {
    return this.#submit({ kind: 'update', key, value, revision })
  }

  put(key: string, value: Uint8Array): Promise<number> {
    return this.#submit({ kind: 'put', key, value })
  }

  async delete(key: string, options?: { readonly revision?: number }): Promise<void> {
    await this.#submit({ kind: 'delete', key, revision: options?.revision })
  }

  watch(options: KvWatchOptions = {}): KvWatcher {
    if (options.key !== undefined && options.key !== '>') checkKey(options.key.endsWith('.>') ? options.key.slice(0, -2) : options.key)
    this.#checkOpen()
    const initial: KvEntry[] = []
    if (options.include !== 'updates_only') {
      for (const [key, held] of this.#values) if (keyMatches(options.key, key)) initial.push(this.#entry(key, held, 'PUT'))
      // In revision order, as a NATS watch hands out the last values (by their stream sequence).
      initial.sort((a, b) => a.revision - b.revision)
    }
    // Registered in the same turn as the values are copied: no change falls between them.
    const watcher = new KvWatchQueue(options.key, initial, (q) => this.#watchers.delete(q))
    this.#watchers.add(watcher)
    return watcher
  }

  async status(): Promise<KvBucketStatus> {
    this.#checkOpen()
    return { bucket: this.name, values: this.#values.size, revision: this.#revision }
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      await this.#commits.drain()
      for (const w of [...this.#watchers]) w.end()
      try {
        await this.#log?.close()
      } finally {
        this.#log = undefined
        openFolders.delete(this.#folder)
      }
    })()
    return this.#closing
  }

  #checkOpen(): void {
    if (this.#closing !== undefined) throw new KvError('closed', `kv bucket ${this.name} is closed`)
    if (this.#failure !== undefined) throw this.#failure
  }

  #entry(key: string, held: Held, operation: 'PUT' | 'DEL'): KvEntry {
    return { bucket: this.name, key, value: held.value, revision: held.revision, created: held.created, operation }
  }

  async #submit(op: Operation): Promise<number> {
    checkKey(op.key)
    if (op.kind !== 'delete') {
      if (!(op.value instanceof Uint8Array)) throw new KvError('invalid_argument', 'a value must be a Uint8Array')
      if (op.value.length > this.#limits.maxValueBytes) throw new KvError('value_too_large', `a value of ${op.value.length} bytes exceeds the bucket's ${this.#limits.maxValueBytes}`)
    }
    if (op.kind === 'update' || (op.kind === 'delete' && op.revision !== undefined)) checkRevision(op.revision as number)
    this.#checkOpen()
    // Copied: the caller may reuse its buffer once the call returns.
    const pending: Pending = { op: op.kind === 'delete' ? op : { ...op, value: new Uint8Array(op.value) } }
    await this.#commits.submit(pending)
    if (pending.error !== undefined) throw pending.error
    return pending.revision ?? this.#revision
  }

  /**
   * Decides each operation of the batch against the values as the ones before it leave
   * them, writes the changes as one frame and syncs it, and only then makes them visible
   * (to `get` and the watches) and resolves them.
   */
  async #commit(batch: Pending[]): Promise<void> {
    if (this.#failure !== undefined) throw this.#failure
    const after = new Map<string, Held | null>()
    const current = (key: string) => (after.has(key) ? after.get(key) ?? undefined : this.#values.get(key))
    let keys = this.#values.size
    let revision = this.#revision
    const changes: StoredChange[] = []
    for (const p of batch) {
      const { op } = p
      const held = current(op.key)
      const refuse = (error: KvError) => void (p.error = error)
      if (op.kind === 'create' && held !== undefined) refuse(new KvError('exists', `key ${op.key} has a value`))
      else if (op.kind === 'update' && held?.revision !== op.revision) refuse(new KvError('wrong_revision', `key ${op.key} is not at revision ${op.revision}`))
      else if (op.kind === 'delete' && op.revision !== undefined && held?.revision !== op.revision) refuse(new KvError('wrong_revision', `key ${op.key} is not at revision ${op.revision}`))
      else if (op.kind !== 'delete' && held === undefined && keys >= this.#limits.maxKeys) refuse(new KvError('bucket_full', `bucket ${this.name} holds its ${this.#limits.maxKeys} keys`))
      if (p.error !== undefined || (op.kind === 'delete' && held === undefined)) continue
      revision += 1
      const time = this.#now()
      if (op.kind === 'delete') {
        after.set(op.key, null)
        keys -= 1
        changes.push({ op: OP_DEL, revision, time, key: op.key, value: new Uint8Array(0) })
      } else {
        after.set(op.key, { revision, created: time, value: op.value })
        if (held === undefined) keys += 1
        changes.push({ op: OP_PUT, revision, time, key: op.key, value: op.value })
      }
      p.revision = revision
    }
    if (changes.length === 0) return
    await this.#append(encodeFrame(changes))
    this.#revision = revision
    for (const c of changes) {
      const entry: KvEntry = { bucket: this.name, key: c.key, value: c.value, revision: c.revision, created: c.time, operation: c.op === OP_DEL ? 'DEL' : 'PUT' }
      if (c.op === OP_DEL) this.#values.delete(c.key)
      else this.#values.set(c.key, { revision: c.revision, created: c.time, value: c.value })
      for (const w of this.#watchers) w.offer(entry)
    }
    if (this.#logBytes >= this.#compactAt) await this.#compact()
  }

  async #append(frame: Buffer): Promise<void> {
    const log = await this.#openLog().catch((err: unknown) => {
      throw new KvError('io', `kv bucket ${this.name}: the change log cannot be opened`, { cause: err, transient: true })
    })
    try {
      writeFully(log.fd, frame, this.#logBytes)
    } catch (err) {
      // Nothing was synced: cutting the partial frame off leaves the file as acknowledged.
      try {
        await log.truncate(this.#logBytes)
      } catch (again) {
        throw this.#stop(new KvError('io', `kv bucket ${this.name}: a failed write could not be undone`, { cause: again }))
      }
      throw new KvError('io', `kv bucket ${this.name}: write failed`, { cause: err, transient: true })
    }
    try {
      await log.datasync()
    } catch (err) {
      // After a failed fsync the kernel may have dropped the pages and a second fsync
      // would report success for bytes that are gone: only a reload from disk is honest.
      throw this.#stop(new KvError('io', `kv bucket ${this.name}: fdatasync failed`, { cause: err }))
    }
    this.#logBytes += frame.length
  }

  #stop(err: KvError): KvError {
    this.#failure ??= err
    this.#options.onFailure?.(err)
    return err
  }

  async #openLog(): Promise<FileHandle> {
    if (this.#log === undefined) {
      this.#log = await open(this.#logPath, 'a+', 0o600)
      // A new file's name is durable only once its folder is synced.
      await syncDir(this.#folder)
    }
    return this.#log
  }

  /** Rewrites the snapshot from the values and empties the change log. A failure leaves both as they were. */
  async #compact(): Promise<void> {
    const written = { bytes: 0 }
    try {
      await replaceFileDurably(this.#snapshotPath, this.#folder, snapshotFrames(this.#values, this.#revision, written), 0o600)
    } catch (err) {
      // The log still holds every change: retry once it has grown as much again.
      this.#compactAt = this.#logBytes * 2
      this.#options.onWarning?.(`kv bucket ${this.name}: snapshot not written; the change log keeps growing until one is`, err)
      return
    }
    this.#compactAt = Math.max(LOG_MIN_BYTES, written.bytes)
    try {
      const log = await this.#openLog()
      await log.truncate(0)
      await log.datasync()
      this.#logBytes = 0
    } catch (err) {
      // Its changes are in the snapshot, and skipped on load by their revision.
      this.#options.onWarning?.(`kv bucket ${this.name}: change log not emptied after a snapshot`, err)
    }
  }

  async #load(): Promise<void> {
    await mkdir(this.#folder, { recursive: true, mode: 0o700 })
    await syncDir(dirname(this.#folder))
    const files = await readBucketFiles(this.#snapshotPath, this.#logPath, this.#values)
    this.#revision = files.revision
    this.#compactAt = Math.max(LOG_MIN_BYTES, files.snapshotBytes)
    const handle = await this.#openLog()
    if (files.tornBytes > 0) {
      // A torn last frame: never acknowledged. Cut off, so the next frame follows a whole one.
      await handle.truncate(files.logBytes)
      await handle.datasync()
      this.#options.onWarning?.(`kv bucket ${this.name}: cut a torn tail of ${files.tornBytes} bytes left by a crash`)
    }
    this.#logBytes = files.logBytes
  }
}
