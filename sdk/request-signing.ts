import { sha256 } from '@noble/hashes/sha2.js'
// The gateway verifies with this same function: one definition of what is signed.
import { signingString } from './signing-string.js'
import { toBase64, toHex, utf8Bytes } from './bytes.js'
import type { Ed25519Signer } from './ed25519-signer.js'

export { signingString }

/** One ingest request, signed: send `body` byte for byte with exactly these headers. */
export interface SignedRequest {
  readonly method: 'POST'
  /** The path that was signed: the request must go to exactly this path. */
  readonly path: string
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
}

export interface SignRequestInput {
  readonly sourceId: string
  readonly keyId: string
  readonly key: Ed25519Signer
  /** The exact body bytes; a string is sent as its UTF-8 bytes. */
  readonly body: Uint8Array | string
  /** Path before `/v1/...` when the gateway's URL has one (`https://host/prefix`): the path the request is sent to is the one signed. */
  readonly pathPrefix?: string
  /** Defaults to now (ISO 8601 UTC with milliseconds). */
  readonly timestamp?: string
  /** Defaults to 16 random bytes as base64url (22 characters). */
  readonly nonce?: string
  /** Sent as `Idempotency-Key` (the signal_id format: 8 to 128 of letters, digits, `_`, `-`, `:`); not signed. */
  readonly idempotencyKey?: string
}

/** A fresh nonce: 16 random bytes, base64url (the gateway takes 1 to 128 visible ASCII characters). */
export function newNonce(): string {
  const bytes = new Uint8Array(16)
  crypto.getRandomValues(bytes)
  return toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}

/** Lowercase hex SHA-256. @noble/hashes, not crypto.subtle: signing must work where subtle is missing. */
export const sha256Hex = (bytes: Uint8Array): string => toHex(sha256(bytes))

/**
 * Signs one request to `POST {pathPrefix}/v1/byo/sources/{sourceId}/signals`: the signing
 * string is method, path, X-Svc-Timestamp, X-Svc-Nonce and the hex SHA-256 of the body,
 * joined by line feeds, and the signature travels as `X-Svc-Signature: ed25519=:<base64>:`.
 */
export async function signRequest(input: SignRequestInput): Promise<SignedRequest> {
  const path = `${input.pathPrefix ?? ''}/v1/byo/sources/${encodeURIComponent(input.sourceId)}/signals`
  const body = typeof input.body === 'string' ? utf8Bytes(input.body) : input.body
  const timestamp = input.timestamp ?? new Date().toISOString()
  const nonce = input.nonce ?? newNonce()
  const signature = await input.key.sign(utf8Bytes(signingString('POST', path, timestamp, nonce, sha256Hex(body))))
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-svc-source-id': input.sourceId,
    'x-svc-key-id': input.keyId,
    'x-svc-timestamp': timestamp,
    'x-svc-nonce': nonce,
    'x-svc-signature': `ed25519=:${toBase64(signature)}:`,
  }
  if (input.idempotencyKey !== undefined) headers['idempotency-key'] = input.idempotencyKey
  return { method: 'POST', path, headers, body }
}
