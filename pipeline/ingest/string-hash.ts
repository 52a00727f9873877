/**
 * A 64-bit hash of a string, as two 32-bit halves, for the expiring indexes. Not
 * cryptographic: the keys it hashes (nonces, signal ids, idempotency keys) are chosen
 * by a creator whose signature already verified, so only accidental collisions
 * matter, and at 64 bits one in a million live keys meets another with odds of about
 * 1 in 10^13. Based on cyrb53 (public domain), widened to two full 32-bit words.
 * Writes into `out` so the hot path allocates nothing.
 */
export function hash64(s: string, seed: number, out: Uint32Array): void {
  let h1 = 0xdeadbeef ^ seed
  let h2 = 0x41c6ce57 ^ seed
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    h1 = Math.imul(h1 ^ c, 2654435761)
    h2 = Math.imul(h2 ^ c, 1597334677)
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507)
  h1 ^= Math.imul(h2 ^ (h2 >>> 13), 3266489909)
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507)
  h2 ^= Math.imul(h1 ^ (h1 >>> 13), 3266489909)
  out[0] = h1 >>> 0
  out[1] = h2 >>> 0
}
