import { generateKeyPairSync, randomBytes } from 'node:crypto'

/**
 * The delivery key ring as stored: the Ed25519 keys that sign webhook deliveries, private
 * keys included, as one JSON document `{ "keys": [...] }`, oldest first. The same form
 * the ring had in DATA_DIR/delivery-keys.json, so the old file is read by the same code.
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

export type DeliveryKeyRing = readonly StoredDeliveryKey[]

export const RING_LIMITS = {
  /**
   * Keys signing at once (the current one and those inside their overlap). Each one is
   * a signature on every delivery and about 300 bytes of the ring's one value, so
   * rotating again and again within an overlap must stop somewhere: past it a rotation
   * is refused until the oldest key retires.
   */
  maxSigningKeys: 32,
  /** Bytes of the stored ring: room for maxSigningKeys keys twice over. */
  maxValueBytes: 32 * 1024,
} as const

export function newKey(now: number): StoredDeliveryKey {
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

/** The keys that sign at `at`: the current one and any still inside its overlap. */
export function signingKeys(ring: DeliveryKeyRing, at: number): StoredDeliveryKey[] {
  return ring.filter((k) => k.retires_at === null || Date.parse(k.retires_at) > at)
}

/**
 * The ring after a rotation at `at`: a new current key; the one it replaces signs for
 * `overlapMs` more; keys whose overlap has ended are dropped. Undefined if the ring
 * would pass RING_LIMITS.maxSigningKeys.
 */
export function rotatedRing(ring: DeliveryKeyRing, at: number, overlapMs: number): StoredDeliveryKey[] | undefined {
  const retiresAt = new Date(at + overlapMs).toISOString()
  const kept = signingKeys(ring, at).map((k) => (k.retires_at === null ? { ...k, retires_at: retiresAt } : k))
  // The replaced key does not count once its overlap is zero: it no longer signs.
  if (kept.filter((k) => Date.parse(k.retires_at as string) > at).length >= RING_LIMITS.maxSigningKeys) return undefined
  return [...kept, newKey(at)]
}

export function encodeRing(ring: DeliveryKeyRing): Uint8Array {
  return Buffer.from(JSON.stringify({ keys: ring }))
}

const isKey = (k: unknown): k is StoredDeliveryKey => {
  const o = k as Record<string, unknown>
  return (
    typeof o === 'object' && o !== null &&
    typeof o.key_id === 'string' && typeof o.public_key === 'string' && typeof o.secret === 'string' &&
    typeof o.created_at === 'string' && (o.retires_at === null || typeof o.retires_at === 'string')
  )
}

/** The ring in `bytes`, or undefined if they hold no ring (not JSON, no `keys` list, or a key missing a field). */
export function decodeRing(bytes: Uint8Array): DeliveryKeyRing | undefined {
  let doc: unknown
  try {
    doc = JSON.parse(Buffer.from(bytes).toString('utf8'))
  } catch {
    return undefined
  }
  const keys = (doc as { keys?: unknown } | null)?.keys
  return Array.isArray(keys) && keys.length > 0 && keys.every(isKey) ? keys : undefined
}
