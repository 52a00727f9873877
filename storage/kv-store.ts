/**
 * The key-value port every store of shared state is built on (rentals, webhook
 * endpoints, delivery positions, usage meters). Shaped by NATS KV (`@nats-io/kv`), not
 * by the local files' convenience, so that the embedded adapter (`kv-file.ts`) and a
 * NATS KV bucket can stand behind the same interface and pass the same contract tests:
 *
 * - Every change gets a revision from one counter per bucket (the KV stream's sequence),
 *   increasing with every put and delete and never reused, restarts included.
 * - `create` writes only if the key has no value (never written, or deleted): a second
 *   create fails with `exists`. `update` writes only if the key's value is still the one
 *   of `revision`: otherwise `wrong_revision`. These two are how correctness is kept
 *   between processes; nothing may rest on a check and a write in one turn of the loop.
 * - A write resolves once it is durable, as far as its adapter can make it: the file
 *   adapter fdatasyncs first (the write survives `kill -9` and a power cut); the NATS
 *   adapter resolves on the stream's acknowledgement, which on nats-server 2.9 means
 *   written to the operating system of each replica, not fsynced (it survives `kill -9`
 *   of a server; a power cut only on a bucket of 3 replicas, of which a majority held it).
 * - `watch` yields the changes in revision order, from the current values on if asked,
 *   so a process keeps an index of a bucket and sees the other processes' changes. A
 *   watch outlives an outage of the storage (the NATS adapter resumes after the last
 *   revision it handed out); a change overwritten meanwhile is handed out as its latest
 *   revision only.
 */

/** A value as stored, or a deletion as a watch reports it. */
export interface KvEntry {
  readonly bucket: string
  readonly key: string
  /** Empty for a deletion. */
  readonly value: Uint8Array
  readonly revision: number
  /** Milliseconds since the epoch at which the bucket stored the change. */
  readonly created: number
  readonly operation: 'PUT' | 'DEL'
}

/** A change as a watch yields it. */
export interface KvWatchEntry extends KvEntry {
  /** False for a current value handed out at the start of a `last_values` watch. */
  readonly isUpdate: boolean
}

export interface KvWatchOptions {
  /** One key, or a prefix ending in `>` (`rental.>`); omitted: every key. */
  readonly key?: string
  /** `last_values` (the default): the current value of every key first, then the changes. */
  readonly include?: 'last_values' | 'updates_only'
}

/**
 * Changes as they come, in revision order. Iteration ends when `stop()` is called or
 * the bucket closes; it throws KvError `watch_overflow` if the consumer fell more than
 * KV_LIMITS.watchBacklog changes behind (memory must not grow with a stalled consumer):
 * watch again from the current values.
 */
export interface KvWatcher extends AsyncIterable<KvWatchEntry> {
  /**
   * Resolves once the consumer has taken every current value a `last_values` watch
   * started with (asked for the entry after the last of them), at once if there were none.
   */
  readonly initialized: Promise<void>
  stop(): void
}

export interface KvBucketStatus {
  readonly bucket: string
  /** Keys holding a value. */
  readonly values: number
  /** The last revision given out (0 for a new bucket). */
  readonly revision: number
}

export interface KvBucket {
  readonly name: string
  /** The key's value, or null if it has none (never written, or deleted). */
  get(key: string): Promise<KvEntry | null>
  /** Writes `value` if the key has none; resolves with the new revision. KvError `exists` otherwise. */
  create(key: string, value: Uint8Array): Promise<number>
  /** Writes `value` if the key's value is the one of `revision`; KvError `wrong_revision` otherwise (a deleted key included). */
  update(key: string, value: Uint8Array, revision: number): Promise<number>
  /** Writes `value` whatever the key holds. */
  put(key: string, value: Uint8Array): Promise<number>
  /**
   * Deletes the key's value (a no-op for a key without one). With `revision`, only if the
   * value is still the one of that revision: KvError `wrong_revision` otherwise.
   */
  delete(key: string, options?: { readonly revision?: number }): Promise<void>
  watch(options?: KvWatchOptions): KvWatcher
  status(): Promise<KvBucketStatus>
  /** Finishes the writes under way, ends the watches and closes. Safe to call twice. */
  close(): Promise<void>
}

/** Bounds a bucket is opened with. */
export interface KvBucketLimits {
  /** Keys holding a value; a create or put of a new key past it fails with `bucket_full`. */
  readonly maxKeys: number
  /** Bytes of one value, at most KV_LIMITS.maxValueBytes. */
  readonly maxValueBytes: number
}

/** Opens (creating if need be) the bucket `name`. */
export type OpenKvBucket = (name: string, limits: KvBucketLimits) => Promise<KvBucket>

export const KV_LIMITS = {
  /** UTF-8 bytes of a key (NATS allows longer subjects; ids never need more). */
  maxKeyBytes: 256,
  /** NATS's default max_payload, less room for headers. */
  maxValueBytes: 1000 * 1024,
  /** Changes a watch holds for a consumer that does not take them, beyond the current values it started with. */
  watchBacklog: 100_000,
  /** Bucket names: a NATS stream name is `KV_<name>`. */
  bucketName: /^[A-Za-z0-9_-]{1,64}$/,
} as const

/**
 * What a NATS subject token allows (keys are subjects under `$KV.<bucket>.`): letters,
 * digits and `-/_=.`, no empty token (so no leading, trailing or doubled dot).
 */
const KEY = /^[-/_=A-Za-z0-9]+(\.[-/_=A-Za-z0-9]+)*$/

export type KvErrorCode =
  /** `create` of a key that has a value. */
  | 'exists'
  /** `update` or `delete` with a revision that is not the key's current value's. */
  | 'wrong_revision'
  /** A key outside the allowed form or length. */
  | 'invalid_key'
  /** A value over the bucket's maxValueBytes. */
  | 'value_too_large'
  /** A new key past the bucket's maxKeys. */
  | 'bucket_full'
  /** A caller passed something else the contract does not allow (a revision that is no positive integer). */
  | 'invalid_argument'
  /** The bucket was closed; nothing was written. */
  | 'closed'
  /** The storage failed; a write was not made (transient) or its fate is unknown and the bucket stopped (permanent). */
  | 'io'
  /**
   * The storage cannot be reached for now (a NATS adapter's timeouts, disconnects and
   * leader elections). A write that fails so may still have been made: read again (a
   * create or an update by revision cannot apply twice).
   */
  | 'unavailable'
  /** Stored bytes fail their checksum outside the recoverable tail: an operator must look. */
  | 'corrupt'
  /** A watch's consumer fell too far behind; watch again. */
  | 'watch_overflow'

/** Codes worth retrying as they are; the others need a change of input, a new read, or an operator. */
const TRANSIENT: ReadonlySet<KvErrorCode> = new Set(['unavailable', 'watch_overflow'])

/**
 * The one error type KV adapters throw. Callers branch on `code` (and `transient`), never
 * on the message, which is for people.
 */
export class KvError extends Error {
  readonly code: KvErrorCode
  /** True when the same call may succeed later as it is (an `io` error says which it is). */
  readonly transient: boolean

  constructor(code: KvErrorCode, message: string, options?: { cause?: unknown; transient?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'KvError'
    this.code = code
    this.transient = options?.transient ?? TRANSIENT.has(code)
  }
}

export function isKvError(err: unknown, code?: KvErrorCode): err is KvError {
  return err instanceof KvError && (code === undefined || err.code === code)
}

/** A write at the revision read that another writer beat (`exists`, `wrong_revision`): read again and decide again. */
export function isRevisionRace(err: unknown): boolean {
  return isKvError(err, 'exists') || isKvError(err, 'wrong_revision')
}

/**
 * The write of a read-decide-write round: `value` over the entry `read` (create-if-absent
 * when the key had none), or, for a null `value`, the entry deleted at its revision.
 * Resolves with the new revision (0 for a deletion, or nothing to delete); a writer that
 * got there first makes it fail as isRevisionRace says.
 */
export async function writeOverRead(bucket: KvBucket, key: string, read: { readonly revision: number } | null, value: Uint8Array | null): Promise<number> {
  if (value === null) {
    if (read !== null) await bucket.delete(key, { revision: read.revision })
    return 0
  }
  return read === null ? bucket.create(key, value) : bucket.update(key, value, read.revision)
}

/** Throws `invalid_key` unless `key` is one both adapters can store. */
export function checkKey(key: string): void {
  if (typeof key !== 'string' || !KEY.test(key) || Buffer.byteLength(key) > KV_LIMITS.maxKeyBytes) {
    throw new KvError('invalid_key', `key must be 1 to ${KV_LIMITS.maxKeyBytes} characters of A-Z a-z 0-9 - / _ = in dot-separated tokens`)
  }
}

/** Throws `invalid_argument` unless `revision` can be one a bucket gave out. */
export function checkRevision(revision: number): void {
  if (!Number.isSafeInteger(revision) || revision < 1) throw new KvError('invalid_argument', 'revision must be a positive integer')
}

/** Throws `invalid_argument` unless `limits` are within what adapters support. */
export function checkLimits(limits: KvBucketLimits): void {
  if (!Number.isSafeInteger(limits.maxKeys) || limits.maxKeys < 1) throw new KvError('invalid_argument', 'maxKeys must be a positive integer')
  if (!Number.isSafeInteger(limits.maxValueBytes) || limits.maxValueBytes < 1 || limits.maxValueBytes > KV_LIMITS.maxValueBytes) {
    throw new KvError('invalid_argument', `maxValueBytes must be 1 to ${KV_LIMITS.maxValueBytes}`)
  }
}

/** Whether `key` is selected by a watch's `filter` (a key, a `prefix.>`, or undefined for all). */
export function keyMatches(filter: string | undefined, key: string): boolean {
  if (filter === undefined || filter === '>') return true
  return filter.endsWith('.>') ? key.startsWith(filter.slice(0, -1)) : key === filter
}
