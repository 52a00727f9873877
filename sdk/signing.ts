import { createHash, createPrivateKey, generateKeyPairSync, randomBytes, sign, type KeyObject } from 'node:crypto'
// The one schema file the SDK needs, not the schemas entry: a creator's server should not
// load the control-plane checks and the OpenAPI document to sign a push.
import { signingString as signedFields } from '../schemas/signal.js'

/**
 * What a creator's server needs to push a signal: the signing string of spec 5.1 and
 * the headers of spec 5.2. Used by the tests and the benchmark, and a reference for
 * creators writing their own client.
 */

/** Spec 5.1, over the raw body: method, path, timestamp, nonce and the body's SHA-256 (hex), joined by a line feed. */
export function signingString(method: string, path: string, timestamp: string, nonce: string, rawBody: Uint8Array): string {
  return signedFields(method, path, timestamp, nonce, createHash('sha256').update(rawBody).digest('hex'))
}

export interface CreatorKey {
  readonly privateKey: KeyObject
  /** base64 of the 32 raw public key bytes, as registered with the gateway. */
  readonly publicKeyBase64: string
}

/** A fresh Ed25519 keypair. */
export function generateCreatorKey(): CreatorKey {
  const { privateKey } = generateKeyPairSync('ed25519')
  return { privateKey, publicKeyBase64: rawPublicKey(privateKey).toString('base64') }
}

/** A keypair from a 32-byte seed (PKCS#8 wraps the seed behind a fixed prefix). */
export function creatorKeyFromSeed(seed: Uint8Array): CreatorKey {
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed])
  const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
  return { privateKey, publicKeyBase64: rawPublicKey(privateKey).toString('base64') }
}

/** The 32 raw public-key bytes of an Ed25519 private key (the JWK's `x`). */
function rawPublicKey(privateKey: KeyObject): Buffer {
  const jwk = privateKey.export({ format: 'jwk' })
  return Buffer.from(jwk.x as string, 'base64url')
}

export interface SignedPush {
  readonly path: string
  readonly body: Buffer
  readonly headers: Record<string, string>
}

/** Builds and signs one ingest request for `payload` (serialised once; those exact bytes are signed). */
export function signPush(options: {
  baseUrlPath?: string
  sourceId: string
  keyId: string
  key: CreatorKey
  payload: unknown
  timestamp?: string
  nonce?: string
  idempotencyKey?: string
}): SignedPush {
  const path = `${options.baseUrlPath ?? ''}/v1/byo/sources/${options.sourceId}/signals`
  const body = Buffer.from(JSON.stringify(options.payload))
  const timestamp = options.timestamp ?? new Date().toISOString()
  const nonce = options.nonce ?? randomBytes(16).toString('base64url')
  const signature = sign(null, Buffer.from(signingString('POST', path, timestamp, nonce, body)), options.key.privateKey)
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'x-svc-source-id': options.sourceId,
    'x-svc-key-id': options.keyId,
    'x-svc-timestamp': timestamp,
    'x-svc-nonce': nonce,
    'x-svc-signature': `ed25519=:${signature.toString('base64')}:`,
  }
  if (options.idempotencyKey !== undefined) headers['idempotency-key'] = options.idempotencyKey
  return { path, body, headers }
}
