import sodium from 'sodium-native'

/**
 * Ed25519 signature check used by the verify workers. Kept to one native call and
 * no other imports: it runs inside every piscina worker (sodium-native because it
 * measured fastest on one core; docs/benchmarks.md, "Dependencies and measured choices").
 */

const PUBLIC_KEY_BYTES = 32
const SIGNATURE_BYTES = 64

/**
 * True only for a valid 64-byte signature of `message` under the 32-byte `publicKey`.
 * Never throws: malformed input is simply not a valid signature.
 *
 * libsodium refuses S >= L (malleability), a small-order R or A, a non-canonical
 * A, and (by comparing encodings) a non-canonical R: what the Wycheproof vectors in
 * `test/fixtures/` demand. @noble/ed25519's default ZIP-215 mode does not (it
 * accepts Wycheproof tcId 151), which is one more reason it stays off this path.
 */
export function verifyEd25519(publicKey: Uint8Array, message: Uint8Array, signature: Uint8Array): boolean {
  // Exact lengths here, not in sodium-native: its binding only asserts
  // `sig.byteLength >= 64` and reads the first 64 bytes, so a valid signature with
  // bytes appended would verify (Wycheproof's SignatureWithGarbage vectors).
  if (publicKey.byteLength !== PUBLIC_KEY_BYTES || signature.byteLength !== SIGNATURE_BYTES) return false
  try {
    // The typings ask for Buffer, but the binding takes any ArrayBufferView;
    // casting avoids wrapping three views per call on the hot path.
    return sodium.crypto_sign_verify_detached(signature as Buffer, message as Buffer, publicKey as Buffer)
  } catch {
    // Only reachable for a detached or non-view argument; still "not valid".
    return false
  }
}
