import type { Ed25519Signer } from './ed25519-signer.js'

/** PKCS#8 v1 for Ed25519 is this fixed 16-byte header and the 32-byte seed (RFC 8410). */
const PKCS8_PREFIX = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20]
const PROBE = new Uint8Array([0x73, 0x64, 0x6b])

/**
 * The runtime's WebCrypto Ed25519 (Node 20, current browsers, Deno, Bun, edge runtimes),
 * or undefined where `crypto.subtle` lacks it: no subtle at all (a browser page not served
 * over HTTPS), or no Ed25519 (older browsers). The key is imported non-extractable, so the
 * seed is not kept in JavaScript memory past this call.
 */
export async function webCryptoSigner(seed: Uint8Array): Promise<Ed25519Signer | undefined> {
  const subtle = globalThis.crypto?.subtle
  if (subtle === undefined) return undefined
  const der = new Uint8Array(48)
  der.set(PKCS8_PREFIX)
  der.set(seed, 16)
  let key: CryptoKey
  try {
    key = await subtle.importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign'])
    // Some runtimes import a key they then cannot sign with; find out now, not at the first push.
    await subtle.sign({ name: 'Ed25519' }, key, PROBE)
  } catch {
    return undefined
  } finally {
    der.fill(0)
  }
  return {
    backend: 'webcrypto',
    async sign(message) {
      return new Uint8Array(await subtle.sign({ name: 'Ed25519' }, key, message as Uint8Array<ArrayBuffer>))
    },
  }
}
