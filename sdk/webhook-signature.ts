import * as ed from '@noble/ed25519'
import { hmac } from '@noble/hashes/hmac.js'
import { sha256, sha512 } from '@noble/hashes/sha2.js'
import { bytesEqual, fromBase64, toBase64, utf8Bytes } from './bytes.js'
import { GatewaySdkError } from './errors.js'

// noble's synchronous verify needs a SHA-512 (its async one would need crypto.subtle,
// which a page not served over HTTPS lacks). Set only if nobody set one before.
ed.hashes.sha512 ??= sha512

/**
 * Checking a webhook delivery the gateway (or `sgw listen`) sent, by the Standard Webhooks
 * convention: the signed content is `<webhook-id>.<webhook-timestamp>.<body>`, and
 * `webhook-signature` holds one or more space-separated `<scheme>,<base64>` values. Two
 * schemes: `v1a`, an Ed25519 signature checked with the gateway's public delivery keys
 * (`whpk_` + base64 of the raw 32 bytes, from GET /v1/delivery-keys), and `v1`, an
 * HMAC-SHA256 with a shared `whsec_` secret (what the official Standard Webhooks
 * libraries verify). A delivery is valid when any one value verifies with any key held.
 */

/** Why a delivery was refused; a stable code to match on. */
export type WebhookFailure =
  /** `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing. */
  | 'missing_header'
  /** `webhook-timestamp` is not whole seconds since 1970. */
  | 'invalid_timestamp'
  /** The timestamp is further from the clock than the tolerance: an old (replayed) or future delivery. */
  | 'stale_timestamp'
  /** No signature value of a scheme the keys given can check. */
  | 'no_usable_signature'
  /** Values of a usable scheme are there, and none verifies: the body, id or time was changed, or the key is not the signer's. */
  | 'invalid_signature'
  /** Neither public keys nor a secret were given, or one is not in its form. */
  | 'invalid_key'

export class WebhookVerificationError extends GatewaySdkError {
  declare readonly code: WebhookFailure
  constructor(code: WebhookFailure, message: string) {
    super(code, message)
  }
}

export interface WebhookKeys {
  /** Delivery public keys for `v1a` (`whpk_` + base64, as GET /v1/delivery-keys lists them). */
  readonly publicKeys?: readonly string[]
  /** The webhook's `whsec_` secret for `v1`. */
  readonly secret?: string
}

export interface VerifyWebhookOptions extends WebhookKeys {
  /** How far `webhook-timestamp` may be from the clock, either way; 300 s by default, as the gateway's own receivers check. */
  readonly toleranceSeconds?: number
  /** The clock, in ms since the epoch; `Date.now()` by default. */
  readonly now?: number
}

export interface VerifiedWebhook {
  readonly id: string
  readonly timestamp: number
  /** The scheme of the value that verified. */
  readonly scheme: 'v1a' | 'v1'
}

/** Header lookup in a plain object (any case) or a fetch `Headers`. */
export type HeaderSource = Headers | Readonly<Record<string, string | readonly string[] | undefined>>

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined
  for (const [k, v] of Object.entries(headers as Record<string, string | readonly string[] | undefined>)) {
    if (k.toLowerCase() === name) return Array.isArray(v) ? v.join(' ') : (v as string | undefined)
  }
  return undefined
}

const bodyBytes = (body: Uint8Array | string): Uint8Array => (typeof body === 'string' ? utf8Bytes(body) : body)

function signedContent(id: string, timestamp: string | number, body: Uint8Array | string): Uint8Array {
  const head = utf8Bytes(`${id}.${timestamp}.`)
  const payload = bodyBytes(body)
  const content = new Uint8Array(head.length + payload.length)
  content.set(head)
  content.set(payload, head.length)
  return content
}

/** The raw bytes of a `whsec_` secret (base64 after the prefix, as Standard Webhooks writes it). */
function secretBytes(secret: string): Uint8Array {
  const raw = fromBase64(secret.startsWith('whsec_') ? secret.slice(6) : secret)
  if (raw === undefined || raw.length === 0) throw new WebhookVerificationError('invalid_key', 'the secret is not whsec_ followed by base64')
  return raw
}

function publicKeyBytes(key: string): Uint8Array {
  const raw = fromBase64(key.startsWith('whpk_') ? key.slice(5) : key)
  if (raw === undefined || raw.length !== 32) throw new WebhookVerificationError('invalid_key', `the public key ${key.slice(0, 12)}… is not whpk_ followed by the base64 of 32 bytes`)
  return raw
}

/** A new `whsec_` secret: 32 random bytes, base64, as Standard Webhooks libraries read it. */
export function newWebhookSecret(): string {
  return `whsec_${toBase64(crypto.getRandomValues(new Uint8Array(32)))}`
}

/** The `v1,<base64>` value of an HMAC-SHA256 signature of a delivery, as a `v1` sender writes it. */
export function signWebhookV1(secret: string, id: string, timestamp: number, body: Uint8Array | string): string {
  return `v1,${toBase64(hmac(sha256, secretBytes(secret), signedContent(id, timestamp, body)))}`
}

/**
 * Checks one delivery: the headers, the body exactly as received (the bytes, before any
 * JSON parsing: a re-serialised body does not verify), and the keys. Resolves with the id,
 * time and scheme that verified; throws a `WebhookVerificationError` saying why not.
 */
export function verifyWebhook(headers: HeaderSource, body: Uint8Array | string, options: VerifyWebhookOptions): VerifiedWebhook {
  const publicKeys = (options.publicKeys ?? []).map(publicKeyBytes)
  const secret = options.secret === undefined ? undefined : secretBytes(options.secret)
  if (publicKeys.length === 0 && secret === undefined) throw new WebhookVerificationError('invalid_key', 'give the delivery public keys (v1a) or the webhook secret (v1)')
  const id = header(headers, 'webhook-id')
  const ts = header(headers, 'webhook-timestamp')
  const signatures = header(headers, 'webhook-signature')
  for (const [name, value] of [['webhook-id', id], ['webhook-timestamp', ts], ['webhook-signature', signatures]] as const) {
    if (value === undefined || value === '') throw new WebhookVerificationError('missing_header', `the ${name} header is missing`)
  }
  if (!/^[0-9]{1,12}$/.test(ts as string)) throw new WebhookVerificationError('invalid_timestamp', 'webhook-timestamp is not whole seconds since 1970')
  const tolerance = options.toleranceSeconds ?? 300
  const skew = Math.abs((options.now ?? Date.now()) / 1000 - Number(ts))
  if (skew > tolerance) throw new WebhookVerificationError('stale_timestamp', `webhook-timestamp is ${Math.round(skew)} s from this clock, more than the ${tolerance} s allowed`)
  const content = signedContent(id as string, ts as string, body)
  let usable = 0
  for (const value of (signatures as string).split(' ')) {
    const comma = value.indexOf(',')
    const scheme = value.slice(0, comma)
    const signature = fromBase64(value.slice(comma + 1))
    if (comma < 0 || signature === undefined) continue
    if (scheme === 'v1a' && publicKeys.length > 0) {
      usable++
      if (signature.length === 64 && publicKeys.some((key) => verifyEd25519(signature, content, key))) return { id: id as string, timestamp: Number(ts), scheme }
    } else if (scheme === 'v1' && secret !== undefined) {
      usable++
      if (bytesEqual(signature, hmac(sha256, secret, content))) return { id: id as string, timestamp: Number(ts), scheme }
    }
  }
  if (usable === 0) {
    const have = publicKeys.length > 0 && secret !== undefined ? 'v1a or v1' : publicKeys.length > 0 ? 'v1a (the delivery public keys given)' : 'v1 (the secret given)'
    throw new WebhookVerificationError('no_usable_signature', `webhook-signature holds no ${have} value`)
  }
  throw new WebhookVerificationError('invalid_signature', 'no signature verifies: the body, webhook-id or webhook-timestamp differs from what was signed, or the keys are not the sender\'s')
}

function verifyEd25519(signature: Uint8Array, message: Uint8Array, publicKey: Uint8Array): boolean {
  try {
    return ed.verify(signature, message, publicKey)
  } catch {
    return false
  }
}
