import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'

/**
 * The service's Ed25519 delivery keys: every webhook delivery is signed with each
 * signing key, and renters verify with the public keys published at GET
 * /v1/delivery-keys (`whpk_<base64 of the 32-byte key>`, Standard Webhooks). A rotation
 * adds a new key; the previous one keeps signing until its overlap ends, so a renter
 * who has not fetched the new key yet still verifies every delivery.
 */

export interface StoredDeliveryKey {
  readonly key_id: string
  /** Base64 of the raw 32-byte public key. */
  readonly public_key: string
  /** Base64 PKCS#8 DER of the private key; never leaves the store. */
  readonly secret: string
  readonly created_at: string
  /** Null while current; set when a newer key replaced it: it signs until then. */
  readonly retires_at: string | null
}

/** Where the key ring is kept (a file under DATA_DIR, mode 600; a secret store later). */
export interface DeliveryKeyStorePort {
  load(): Promise<readonly StoredDeliveryKey[] | null>
  save(keys: readonly StoredDeliveryKey[]): Promise<void>
}

export interface PublishedDeliveryKey {
  readonly key_id: string
  readonly public_key: string
  /** `active`: the current key. `retiring`: replaced, still signing until `retires_at`. */
  readonly state: 'active' | 'retiring'
  readonly created_at: string
  readonly retires_at: string | null
}

function newKey(now: number): StoredDeliveryKey {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  const raw = publicKey.export({ format: 'jwk' }).x as string
  return {
    key_id: `dk_${randomBytes(8).toString('hex')}`,
    public_key: Buffer.from(raw, 'base64url').toString('base64'),
    secret: privateKey.export({ format: 'der', type: 'pkcs8' }).toString('base64'),
    created_at: new Date(now).toISOString(),
    retires_at: null,
  }
}

/** The content a signature covers (Standard Webhooks): `${webhook-id}.${webhook-timestamp}.${body}`. */
export function signedContent(webhookId: string, timestamp: number, body: string): Buffer {
  return Buffer.from(`${webhookId}.${timestamp}.${body}`, 'utf8')
}

export class DeliveryKeys {
  readonly #store: DeliveryKeyStorePort
  readonly #now: () => number
  #keys: StoredDeliveryKey[] = []
  readonly #private = new Map<string, KeyObject>()

  private constructor(store: DeliveryKeyStorePort, now: () => number) {
    this.#store = store
    this.#now = now
  }

  /** Loads the ring, creating the first key on a first start. */
  static async open(store: DeliveryKeyStorePort, now: () => number = Date.now): Promise<DeliveryKeys> {
    const keys = new DeliveryKeys(store, now)
    const stored = await store.load()
    if (stored === null || stored.length === 0) {
      keys.#keys = [newKey(now())]
      await store.save(keys.#keys)
    } else keys.#keys = [...stored]
    return keys
  }

  /** The keys that sign now: the current one and any still inside its overlap. */
  #signing(): StoredDeliveryKey[] {
    const at = this.#now()
    return this.#keys.filter((k) => k.retires_at === null || Date.parse(k.retires_at) > at)
  }

  published(): PublishedDeliveryKey[] {
    return this.#signing().map((k) => ({
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
    return this.#signing()
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
   * overlap has ended are dropped from the ring.
   */
  async rotate(overlapMs: number): Promise<PublishedDeliveryKey[]> {
    const at = this.#now()
    const retiresAt = new Date(at + overlapMs).toISOString()
    const kept = this.#signing().map((k) => (k.retires_at === null ? { ...k, retires_at: retiresAt } : k))
    const next = [...kept, newKey(at)]
    await this.#store.save(next)
    this.#keys = next
    return this.published()
  }
}

/** The public key of a published `whpk_` value, for a verifier (tests, examples). */
export function publicKeyOf(whpk: string): KeyObject {
  const raw = Buffer.from(whpk.replace(/^whpk_/, ''), 'base64')
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' })
}
