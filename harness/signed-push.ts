import { createHash, createPrivateKey, randomBytes, sign, type KeyObject } from 'node:crypto'
import { signingString as signedFields } from '@signal-ingest-gateway/sdk/signing-string'

/**
 * A synchronous signer on node:crypto for the tests and the benchmark, beside the creator
 * SDK (sdk/), which is asynchronous because WebCrypto is. The tests sign requests the SDK
 * would never build (old timestamps, reused nonces, other paths, bodies swapped after
 * signing) and the benchmark presigns hundreds of thousands; test/sdk/ checks that the
 * SDK's requests are the same as these.
 */

/** The string a creator signs, over the raw body: method, path, timestamp, nonce and the body's SHA-256 (hex), joined by a line feed. */
export function signingString(method: string, path: string, timestamp: string, nonce: string, rawBody: Uint8Array): string {
  return signedFields(method, path, timestamp, nonce, createHash('sha256').update(rawBody).digest('hex'))
}

export interface CreatorKey {
  readonly privateKey: KeyObject
  /** The 32-byte seed, so the SDK can load the same key. */
  readonly seed: Buffer
  /** base64 of the 32 raw public key bytes, as registered with the gateway. */
  readonly publicKeyBase64: string
}

/** A fresh Ed25519 keypair. */
export const generateCreatorKey = (): CreatorKey => creatorKeyFromSeed(randomBytes(32))

/** A keypair from a 32-byte seed (PKCS#8 wraps the seed behind a fixed prefix). */
export function creatorKeyFromSeed(seed: Uint8Array): CreatorKey {
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed])
  const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })
  const jwk = privateKey.export({ format: 'jwk' })
  return { privateKey, seed: Buffer.from(seed), publicKeyBase64: Buffer.from(jwk.x as string, 'base64url').toString('base64') }
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
