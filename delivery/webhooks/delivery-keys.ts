import { createPrivateKey, createPublicKey, sign, type KeyObject } from 'node:crypto'
import { isKvError, type KvBucket, type KvBucketLimits, type KvWatcher } from '../../storage/index.js'
import { decodeRing, encodeRing, newKey, RING_LIMITS, rotatedRing, signingKeys, type DeliveryKeyRing } from './delivery-key-ring.js'
import { readLegacyRing, retireLegacyFile } from './delivery-key-migration.js'

/**
 * The service's Ed25519 delivery keys: every webhook delivery is signed with each
 * signing key, and renters verify with the public keys published at GET
 * /v1/delivery-keys (`whpk_<base64 of the 32-byte key>`, Standard Webhooks). A rotation
 * adds a new key; the previous one keeps signing until its overlap ends, so a renter
 * who has not fetched the new key yet still verifies every delivery.
 *
 * The ring is one value (key `ring`) of a key-value bucket shared by every delivery
 * process, so they all sign with the same keys and publish the same ones. That value
 * holds the PRIVATE keys: the bucket is a secret, as DATA_DIR/delivery-keys.json at
 * mode 600 was. Embedded, it is DATA_DIR/kv/delivery-keys/ (files mode 600, folder
 * 700); on NATS, whoever can read the bucket's stream (`KV_delivery-keys`, subjects
 * `$KV.delivery-keys.>`) can sign deliveries renters will trust, so only the service's
 * NATS user may be allowed those subjects, and connections must use TLS.
 *
 * Writes are create-if-absent (the first start: processes starting together agree on
 * one ring) and update at the expected revision (a rotation: of two at once, one is
 * written and the other takes it instead of rotating again). Each process signs with
 * the ring its watch of the bucket last delivered, so another process's rotation is
 * used here as soon as the watch brings it.
 */

export type { StoredDeliveryKey } from './delivery-key-ring.js'

const RING_KEY = 'ring'
/** A watch that ended (the bucket was unreachable, or this process fell behind) is started again after this. */
const REWATCH_MS = 1000

export interface DeliveryKeysOptions {
  /** The `delivery-keys` bucket; the caller opens and closes it. */
  readonly bucket: KvBucket
  /** DATA_DIR/delivery-keys.json of earlier versions: moved into the bucket if there is one. */
  readonly legacyFile?: string
  readonly now?: () => number
  readonly onWarning?: (message: string, err?: unknown) => void
}

export interface PublishedDeliveryKey {
  readonly key_id: string
  readonly public_key: string
  /** `active`: the current key. `retiring`: replaced, still signing until `retires_at`. */
  readonly state: 'active' | 'retiring'
  readonly created_at: string
  readonly retires_at: string | null
}

/** A rotation refused: more keys would sign at once than the ring holds. */
export class DeliveryKeyLimitError extends Error {
  readonly code = 'limit_exceeded'
  constructor(message: string) {
    super(message)
    this.name = 'DeliveryKeyLimitError'
  }
}

/** The content a signature covers (Standard Webhooks): `${webhook-id}.${webhook-timestamp}.${body}`. */
export function signedContent(webhookId: string, timestamp: number, body: string): Buffer {
  return Buffer.from(`${webhookId}.${timestamp}.${body}`, 'utf8')
}

export class DeliveryKeys {
  readonly #bucket: KvBucket
  readonly #o: DeliveryKeysOptions
  readonly #now: () => number
  #keys: DeliveryKeyRing = []
  #revision = 0
  readonly #private = new Map<string, KeyObject>()
  #watcher: KvWatcher | undefined
  #watching: Promise<void> = Promise.resolve()
  #closed = false

  private constructor(o: DeliveryKeysOptions) {
    this.#bucket = o.bucket
    this.#o = o
    this.#now = o.now ?? Date.now
  }

  /** The bounds to open the `delivery-keys` bucket with: one key, the ring. */
  static readonly bucketLimits: KvBucketLimits = { maxKeys: 1, maxValueBytes: RING_LIMITS.maxValueBytes }

  /**
   * Resolves once this process holds the bucket's ring and follows its changes. On the
   * first start the ring is written if absent: the old file's if there is one, else one
   * new key; of processes starting together, one writes it and the others take it.
   */
  static async open(o: DeliveryKeysOptions): Promise<DeliveryKeys> {
    const keys = new DeliveryKeys(o)
    const legacy = o.legacyFile === undefined ? null : await readLegacyRing(o.legacyFile)
    if ((await o.bucket.get(RING_KEY)) === null) {
      const ring = legacy ?? [newKey(keys.#now())]
      try {
        keys.#take(ring, await o.bucket.create(RING_KEY, encodeRing(ring)))
      } catch (err) {
        // Another process wrote the first ring meanwhile: the watch brings it.
        if (!isKvError(err, 'exists')) throw err
      }
    }
    await keys.#watch()
    if (keys.#keys.length === 0) {
      await keys.close()
      throw new Error(`the ${o.bucket.name} bucket's ${RING_KEY} holds no delivery keys; restore it from a backup, or delete it to start a new ring`)
    }
    if (legacy !== null) await retireLegacyFile(o.legacyFile!, legacy, keys.#keys, (m) => o.onWarning?.(m))
    return keys
  }

  /** The revision of the ring this process signs with. */
  get revision(): number {
    return this.#revision
  }

  published(): PublishedDeliveryKey[] {
    return signingKeys(this.#keys, this.#now()).map((k) => ({
      key_id: k.key_id,
      public_key: `whpk_${k.public_key}`,
      state: k.retires_at === null ? 'active' : 'retiring',
      created_at: k.created_at,
      retires_at: k.retires_at,
    }))
  }

  /** The `webhook-signature` header: `v1a,<base64>` per signing key, space-separated, newest first. */
  signature(webhookId: string, timestamp: number, body: string): string {
    const content = signedContent(webhookId, timestamp, body)
    return signingKeys(this.#keys, this.#now())
      .reverse()
      .map((k) => {
        let key = this.#private.get(k.key_id)
        if (key === undefined) {
          key = createPrivateKey({ key: Buffer.from(k.secret, 'base64'), format: 'der', type: 'pkcs8' })
          this.#private.set(k.key_id, key)
        }
        return `v1a,${sign(null, content, key).toString('base64')}`
      })
      .join(' ')
  }

  /**
   * Makes a new current key; the one it replaces signs for `overlapMs` more. Keys whose
   * overlap has ended are dropped from the ring. Built on the ring as the bucket holds
   * it now (not as this process's watch last saw it), written at that revision: if
   * another process rotated in between, its rotation stands for this one, so two
   * requests at once make one new key, not two. DeliveryKeyLimitError past
   * RING_LIMITS.maxSigningKeys signing keys.
   */
  async rotate(overlapMs: number): Promise<PublishedDeliveryKey[]> {
    const entry = await this.#bucket.get(RING_KEY)
    const current = entry === null ? this.#keys : decodeRing(entry.value)
    if (current === undefined) throw new Error(`the ${this.#bucket.name} bucket's ${RING_KEY} holds no delivery keys; restore it from a backup`)
    const next = rotatedRing(current, this.#now(), overlapMs)
    if (next === undefined) throw new DeliveryKeyLimitError(`${RING_LIMITS.maxSigningKeys} delivery keys sign already; rotate again once the oldest retires`)
    try {
      // A deleted ring (an operator's doing) is written again from the keys this process signs with.
      this.#take(next, entry === null ? await this.#bucket.create(RING_KEY, encodeRing(next)) : await this.#bucket.update(RING_KEY, encodeRing(next), entry.revision))
    } catch (err) {
      if (!isKvError(err, 'wrong_revision') && !isKvError(err, 'exists')) throw err
      const won = await this.#bucket.get(RING_KEY)
      const ring = won === null ? undefined : decodeRing(won.value)
      if (won !== null && ring !== undefined) this.#take(ring, won.revision)
    }
    return this.published()
  }

  /** Stops following the bucket; the bucket is the caller's to close. Safe to call twice. */
  async close(): Promise<void> {
    this.#closed = true
    this.#watcher?.stop()
    await this.#watching
  }

  /** Follows the ring's key from its current value on; resolves once that value is taken. */
  async #watch(): Promise<void> {
    const watcher = this.#bucket.watch({ key: RING_KEY })
    this.#watcher = watcher
    this.#watching = (async () => {
      try {
        for await (const entry of watcher) {
          if (entry.operation === 'DEL') {
            this.#o.onWarning?.(`delivery keys: the ring was deleted from the ${this.#bucket.name} bucket; signing goes on with the keys held, and the next rotation writes the ring again`)
            continue
          }
          const ring = decodeRing(entry.value)
          if (ring === undefined) this.#o.onWarning?.(`delivery keys: revision ${entry.revision} of the ring holds no keys; signing goes on with the keys held`)
          else this.#take(ring, entry.revision)
        }
      } catch (err) {
        if (this.#closed) return
        // Fell behind or lost the bucket for a while: watch again from the current value; the revision makes taking it twice harmless.
        this.#o.onWarning?.('delivery keys: the ring watch ended; watching again', err)
        setTimeout(() => void (this.#closed ? undefined : this.#watch().catch((again: unknown) => this.#o.onWarning?.('delivery keys: the ring cannot be watched', again))), REWATCH_MS).unref()
      }
    })()
    await watcher.initialized
  }

  /** Signs with `ring` from now on if it is newer than the one held. */
  #take(ring: DeliveryKeyRing, revision: number): void {
    if (revision <= this.#revision) return
    this.#keys = ring
    this.#revision = revision
    const held = new Set(ring.map((k) => k.key_id))
    for (const id of this.#private.keys()) if (!held.has(id)) this.#private.delete(id)
  }
}

/** The public key of a published `whpk_` value, for a verifier (tests, examples). */
export function publicKeyOf(whpk: string): KeyObject {
  const raw = Buffer.from(whpk.replace(/^whpk_/, ''), 'base64')
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
}
