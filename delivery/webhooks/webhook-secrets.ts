import { createHmac, randomBytes } from 'node:crypto'
import type { KvBucket, KvBucketLimits, KvWatcher } from '../../storage/index.js'
import { signedContent, type DeliveryKeys } from './delivery-keys.js'
import type { WebhookEndpoint } from './webhook-state.js'

/**
 * The secrets of the webhooks signed with the `v1` scheme (HMAC-SHA256, Standard
 * Webhooks), one per rental (`secret.<rental_id>`), in a bucket of their own: signing
 * needs the secret itself, so it is kept as the delivery key ring is, as a secret that
 * only the service reads. Embedded it is DATA_DIR/kv/webhook-secrets/ (files mode 600,
 * folder 700); on NATS only the service's user may be allowed `$KV.webhook-secrets.>`.
 * A renter sees its secret once, in the answer that made it.
 *
 * Each secret has an id, which the endpoint names (`secret_id`): a process signs with
 * the secret it holds only when the ids agree, and reads the bucket otherwise, so a
 * secret replaced in another process is never signed with after the endpoint names the new one.
 */

const PREFIX = 'secret.'
/** 24 random bytes: Standard Webhooks asks for 24 to 64. */
const SECRET_BYTES = 24

interface StoredSecret {
  readonly secret_id: string
  /** base64 of the key bytes (the `whsec_` value without its prefix). */
  readonly key: string
}

/** Signs one delivery: the `webhook-signature` header for its id, timestamp and body. */
export type Signer = (webhookId: string, timestamp: number, body: string) => string

/** `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`, as Standard Webhooks' libraries verify it. */
export function hmacSignature(key: Buffer, webhookId: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(signedContent(webhookId, timestamp, body)).digest('base64')}`
}

export class WebhookSecrets {
  readonly #bucket: KvBucket
  readonly #held = new Map<string, StoredSecret>()
  #watcher: KvWatcher | undefined
  #watching: Promise<void> = Promise.resolve()

  private constructor(bucket: KvBucket) {
    this.#bucket = bucket
  }

  /** One key per rental, a small value each. */
  static bucketLimits(maxRentals: number): KvBucketLimits {
    return { maxKeys: maxRentals, maxValueBytes: 1024 }
  }

  /** Resolves once the bucket's secrets are held; follows their changes after that. */
  static async open(bucket: KvBucket, onError: (err: unknown) => void): Promise<WebhookSecrets> {
    const secrets = new WebhookSecrets(bucket)
    const watcher = bucket.watch({ key: `${PREFIX}>` })
    secrets.#watcher = watcher
    secrets.#watching = (async () => {
      for await (const entry of watcher) {
        const rentalId = entry.key.slice(PREFIX.length)
        if (entry.operation === 'DEL') secrets.#held.delete(rentalId)
        else secrets.#held.set(rentalId, JSON.parse(Buffer.from(entry.value).toString('utf8')) as StoredSecret)
      }
    })().catch((err: unknown) => onError(err))
    await watcher.initialized
    return secrets
  }

  /** Makes the rental's new secret, replacing any; returns its id and the `whsec_` value, which is shown once. */
  async create(rentalId: string): Promise<{ secretId: string; whsec: string }> {
    const stored: StoredSecret = { secret_id: `whs_${randomBytes(8).toString('hex')}`, key: randomBytes(SECRET_BYTES).toString('base64') }
    await this.#bucket.put(PREFIX + rentalId, Buffer.from(JSON.stringify(stored)))
    this.#held.set(rentalId, stored)
    return { secretId: stored.secret_id, whsec: `whsec_${stored.key}` }
  }

  async remove(rentalId: string): Promise<void> {
    await this.#bucket.delete(PREFIX + rentalId)
    this.#held.delete(rentalId)
  }

  /** The key bytes of the secret `secretId` of the rental, or undefined when the bucket holds another (or none). */
  async key(rentalId: string, secretId: string): Promise<Buffer | undefined> {
    let stored = this.#held.get(rentalId)
    if (stored?.secret_id !== secretId) {
      const entry = await this.#bucket.get(PREFIX + rentalId)
      stored = entry === null ? undefined : (JSON.parse(Buffer.from(entry.value).toString('utf8')) as StoredSecret)
    }
    return stored?.secret_id === secretId ? Buffer.from(stored.key, 'base64') : undefined
  }

  /** How the endpoint's deliveries are signed: with the delivery keys (`v1a`), or with its own secret (`v1`). */
  async signerFor(endpoint: WebhookEndpoint, keys: DeliveryKeys): Promise<Signer> {
    if (endpoint.scheme !== 'v1') return (id, ts, body) => keys.signature(id, ts, body)
    const key = endpoint.secret_id === undefined ? undefined : await this.key(endpoint.rental_id, endpoint.secret_id)
    // Only if the bucket lost it (restored from an older backup): the renter sets the webhook again for a new secret.
    if (key === undefined) throw new Error(`the v1 secret of rental ${endpoint.rental_id}'s webhook is missing from the ${this.#bucket.name} bucket`)
    return (id, ts, body) => hmacSignature(key, id, ts, body)
  }

  /** Stops following the bucket; the bucket is the caller's to close. Safe to call twice. */
  async close(): Promise<void> {
    this.#watcher?.stop()
    await this.#watching
  }
}
