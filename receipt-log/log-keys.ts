import { createPrivateKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto'
import { isKvError, type KvBucket, type KvBucketLimits } from '../storage/index.js'
import { verifierKey, type NoteSigner } from './signed-note.js'

/**
 * The service's Ed25519 log keys, which sign the receipt log's checkpoints. Kept as the
 * delivery keys are: one JSON value (key `ring`) of a key-value bucket (`log-keys`) every
 * process reads, private keys included, so the bucket is a secret (embedded: files of mode
 * 600 under DATA_DIR/kv/log-keys/; on NATS only the service's user may read its subjects).
 *
 * A rotation adds a new current key; the one it replaces keeps signing until its overlap
 * ends, so during the overlap every checkpoint carries both signatures and a verifier that
 * knows either key accepts it. Unlike the delivery keys, a retired log key is never
 * dropped: a checkpoint it signed stays verifiable, and GET /v1/log/keys lists it.
 */

export interface StoredLogKey {
  readonly key_id: string
  /** Base64 of the 32 raw public-key bytes. */
  readonly public_key: string
  /** Base64 PKCS#8 DER of the private key; never leaves the bucket. */
  readonly secret: string
  readonly created_at: string
  /** Null while current; set at a rotation: it signs until then. */
  readonly retires_at: string | null
}

const RING_KEY = 'ring'
/** Keys kept: every key ever used, so rotations are bounded to keep the one value bounded. */
export const LOG_KEYS_MAX = 256
/** A fresh read of the ring at most this often: another process's rotation is seen within it. */
const RING_CACHE_MS = 1000

export class LogKeyLimitError extends Error {
  readonly code = 'limit_exceeded'
  constructor(message: string) {
    super(message)
    this.name = 'LogKeyLimitError'
  }
}

function newKey(now: number): StoredLogKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  return {
    key_id: `lk_${randomBytes(8).toString('hex')}`,
    public_key: Buffer.from(publicKey.export({ format: 'jwk' }).x as string, 'base64url').toString('base64'),
    secret: privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
    created_at: new Date(now).toISOString(),
    retires_at: null,
  }
}

function decodeRing(bytes: Uint8Array): StoredLogKey[] | undefined {
  try {
    const keys = (JSON.parse(Buffer.from(bytes).toString('utf8')) as { keys?: unknown }).keys
    return Array.isArray(keys) && keys.length > 0 && keys.every((k) => typeof k?.key_id === 'string' && typeof k.public_key === 'string' && typeof k.secret === 'string') ? (keys as StoredLogKey[]) : undefined
  } catch {
    return undefined
  }
}

const encodeRing = (keys: readonly StoredLogKey[]) => Buffer.from(JSON.stringify({ keys }))

export interface PublishedLogKey {
  readonly key_id: string
  /** The signed-note verifier key. */
  readonly verifier_key: string
  /** `active`: signs now; `retiring`: still signs until retires_at; `retired`: signs no more. */
  readonly state: 'active' | 'retiring' | 'retired'
  readonly created_at: string
  readonly retires_at: string | null
}

export class LogKeys {
  readonly #bucket: KvBucket
  readonly #name: string
  readonly #now: () => number
  #cached: { keys: StoredLogKey[]; revision: number; at: number } | undefined
  readonly #private = new Map<string, KeyObject>()

  /** The bucket's bounds: one value, the ring. */
  static readonly bucketLimits: KvBucketLimits = { maxKeys: 1, maxValueBytes: 256 * 1024 }

  /** `name`: the key name of the notes, the log's origin. */
  constructor(bucket: KvBucket, name: string, now: () => number = Date.now) {
    this.#bucket = bucket
    this.#name = name
    this.#now = now
  }

  get name(): string {
    return this.#name
  }

  /** The ring, written at the first use if absent (of processes starting together, one writes and the others take it). */
  async #ring(fresh = false): Promise<{ keys: StoredLogKey[]; revision: number }> {
    const c = this.#cached
    if (!fresh && c !== undefined && this.#now() - c.at < RING_CACHE_MS) return c
    let entry = await this.#bucket.get(RING_KEY)
    if (entry === null) {
      const keys = [newKey(this.#now())]
      try {
        const revision = await this.#bucket.create(RING_KEY, encodeRing(keys))
        this.#cached = { keys, revision, at: this.#now() }
        return this.#cached
      } catch (err) {
        if (!isKvError(err, 'exists')) throw err
        entry = await this.#bucket.get(RING_KEY)
      }
    }
    const keys = entry === null ? undefined : decodeRing(entry.value)
    if (entry === null || keys === undefined) throw new Error(`the ${this.#bucket.name} bucket's ${RING_KEY} holds no log keys; restore it from a backup`)
    this.#cached = { keys, revision: entry.revision, at: this.#now() }
    return this.#cached
  }

  #signing(keys: readonly StoredLogKey[]): StoredLogKey[] {
    const now = this.#now()
    return keys.filter((k) => k.retires_at === null || Date.parse(k.retires_at) > now)
  }

  /** The keys that sign a checkpoint now, newest first, with the ids the checkpoint row records. */
  async signers(): Promise<Array<NoteSigner & { readonly keyId: string }>> {
    const { keys } = await this.#ring()
    return this.#signing(keys)
      .reverse()
      .map((k) => {
        let privateKey = this.#private.get(k.key_id)
        if (privateKey === undefined) {
          privateKey = createPrivateKey({ key: Buffer.from(k.secret, 'base64'), format: 'der', type: 'pkcs8' })
          this.#private.set(k.key_id, privateKey)
        }
        return { keyId: k.key_id, name: this.#name, publicKey: Buffer.from(k.public_key, 'base64'), privateKey }
      })
  }

  /** Every key ever used, oldest first. */
  async published(): Promise<PublishedLogKey[]> {
    const { keys } = await this.#ring()
    const signing = new Set(this.#signing(keys).map((k) => k.key_id))
    return keys.map((k) => ({
      key_id: k.key_id,
      verifier_key: verifierKey(this.#name, Buffer.from(k.public_key, 'base64')),
      state: k.retires_at === null ? 'active' : signing.has(k.key_id) ? 'retiring' : 'retired',
      created_at: k.created_at,
      retires_at: k.retires_at,
    }))
  }

  /** The current key's verifier key. */
  async current(): Promise<string> {
    const keys = await this.published()
    return keys.find((k) => k.state === 'active')!.verifier_key
  }

  /**
   * A new current key; the one it replaces signs for `overlapMs` more. Written at the
   * ring's revision: of two rotations at once, one is written and the other takes it.
   */
  async rotate(overlapMs: number): Promise<PublishedLogKey[]> {
    const { keys, revision } = await this.#ring(true)
    if (keys.length >= LOG_KEYS_MAX) throw new LogKeyLimitError(`the log keeps ${LOG_KEYS_MAX} keys, every one it ever used; no further rotation`)
    const now = this.#now()
    const retiresAt = new Date(now + overlapMs).toISOString()
    const next = [...keys.map((k) => (k.retires_at === null ? { ...k, retires_at: retiresAt } : k)), newKey(now)]
    try {
      const written = await this.#bucket.update(RING_KEY, encodeRing(next), revision)
      this.#cached = { keys: next, revision: written, at: now }
    } catch (err) {
      if (!isKvError(err, 'wrong_revision')) throw err
      await this.#ring(true)
    }
    return this.published()
  }
}
