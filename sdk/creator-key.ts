import { bytesEqual, fromBase64, fromHex, toBase64, toBase64Url, utf8Bytes } from './bytes.js'
import type { Ed25519Backend, Ed25519Signer } from './ed25519-signer.js'
import { GatewaySdkError, KeyFormatError } from './errors.js'
import { parsePkcs8Ed25519, pemToDer } from './pkcs8.js'
import { nobleSigner, publicKeyOf } from './signer-noble.js'
import { webCryptoSigner } from './signer-webcrypto.js'

/** A source's Ed25519 signing key, loaded. */
export interface CreatorKey extends Ed25519Signer {
  /**
   * The 32 raw public-key bytes as unpadded base64url: what
   * `POST /v1/byo/sources/{source_id}/keys` takes as `public_key`.
   */
  readonly publicKey: string
}

/**
 * A private key, one of:
 * - a string holding one PEM block `-----BEGIN PRIVATE KEY-----` (PKCS#8, what
 *   `openssl genpkey -algorithm ed25519` writes), or bytes of that text (a file read without an encoding);
 * - the PKCS#8 DER bytes (48 bytes, or the v2 form with the public key attached);
 * - the 32-byte seed (the private key proper, RFC 8032) as bytes, as 64 hex digits, or as
 *   base64 or base64url (43 characters, or 44 ending in `=`).
 */
export type KeyInput = string | Uint8Array

export interface LoadKeyOptions {
  /**
   * 'auto' (the default): WebCrypto's Ed25519 where the runtime has it, else @noble/ed25519.
   * 'webcrypto' fails where the runtime lacks it; 'noble' always signs in JavaScript.
   */
  readonly backend?: 'auto' | Ed25519Backend
}

const PEM_START = utf8Bytes('-----BEGIN')

/** Loads a private key (see `KeyInput`); a `KeyFormatError` names what is wrong with anything else. */
export async function loadCreatorKey(input: KeyInput, options: LoadKeyOptions = {}): Promise<CreatorKey> {
  const { seed, attachedPublicKey } = seedOf(input)
  try {
    const publicKey = publicKeyOf(seed)
    if (attachedPublicKey !== undefined && !bytesEqual(attachedPublicKey, publicKey)) {
      throw new KeyFormatError('the public key attached to the PKCS#8 key does not belong to its private key')
    }
    const signer = await signerFor(seed, options.backend ?? 'auto')
    return { backend: signer.backend, publicKey: toBase64Url(publicKey), sign: (message) => signer.sign(message) }
  } finally {
    seed.fill(0)
  }
}

/** A new private key as a PKCS#8 PEM block, the same form `openssl genpkey -algorithm ed25519` writes. */
export function generateCreatorKeyPem(): string {
  const der = new Uint8Array(48)
  der.set(fromHex('302e020100300506032b657004220420') as Uint8Array)
  crypto.getRandomValues(der.subarray(16))
  const body = toBase64(der)
  der.fill(0)
  return `-----BEGIN PRIVATE KEY-----\n${body}\n-----END PRIVATE KEY-----\n`
}

async function signerFor(seed: Uint8Array, backend: 'auto' | Ed25519Backend): Promise<Ed25519Signer> {
  if (backend === 'noble') return nobleSigner(seed)
  const web = await webCryptoSigner(seed)
  if (web !== undefined) return web
  if (backend === 'webcrypto') throw new GatewaySdkError('backend_unavailable', "this runtime's WebCrypto cannot sign with Ed25519")
  return nobleSigner(seed)
}

/** A fresh copy of the seed (the caller wipes it) and the v2 key's attached public key. */
function seedOf(input: KeyInput): { seed: Uint8Array; attachedPublicKey: Uint8Array | undefined } {
  if (typeof input === 'string') {
    const text = input.trim()
    if (text.startsWith('-----BEGIN')) return fromPkcs8(pemToDer(text))
    const seed = /^[0-9a-fA-F]{64}$/.test(text) ? fromHex(text) : /^[A-Za-z0-9+/_-]{43}=?$/.test(text) ? fromBase64(text) : undefined
    if (seed?.length === 32) return { seed, attachedPublicKey: undefined }
    throw new KeyFormatError('expected a PEM block (-----BEGIN PRIVATE KEY-----) or a 32-byte seed as 64 hex digits or base64 (43 or 44 characters)')
  }
  if (!(input instanceof Uint8Array)) throw new KeyFormatError('expected a string or a Uint8Array')
  if (input.length === 32) return { seed: new Uint8Array(input), attachedPublicKey: undefined }
  if (input[0] === 0x30) return fromPkcs8(input)
  if (input.length > PEM_START.length && bytesEqual(input.subarray(0, PEM_START.length), PEM_START)) {
    return seedOf(new TextDecoder('utf-8', { fatal: false }).decode(input))
  }
  throw new KeyFormatError(`expected a 32-byte seed, PKCS#8 DER or PEM text; got ${input.length} bytes of neither`)
}

function fromPkcs8(der: Uint8Array): { seed: Uint8Array; attachedPublicKey: Uint8Array | undefined } {
  const parsed = parsePkcs8Ed25519(der)
  return { seed: parsed.seed, attachedPublicKey: parsed.publicKey }
}
