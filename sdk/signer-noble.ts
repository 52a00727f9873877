import * as ed from '@noble/ed25519'
import { sha512 } from '@noble/hashes/sha2.js'
import type { Ed25519Signer } from './ed25519-signer.js'

// noble's synchronous API needs a SHA-512; its async one would use crypto.subtle, which a
// browser page not served over HTTPS does not have. Set only if nobody set one before:
// `hashes` is shared by every user of @noble/ed25519 in the process.
ed.hashes.sha512 ??= sha512

/** Ed25519 in JavaScript, for runtimes whose WebCrypto lacks it. Keeps a copy of the seed. */
export function nobleSigner(seed: Uint8Array): Ed25519Signer {
  const secret = new Uint8Array(seed)
  return {
    backend: 'noble',
    async sign(message) {
      return ed.sign(message, secret)
    },
  }
}

/** The 32 raw public-key bytes of a seed (RFC 8032 section 5.1.5). */
export const publicKeyOf = (seed: Uint8Array): Uint8Array => ed.getPublicKey(seed)
