import { createHash } from 'node:crypto'

/**
 * Fingerprints kept per source of revoked keys whose records were dropped, so that a
 * revoked public key stays refused at registration (revocation is forward-only) after
 * its record is dropped to keep rotation from running into a wall. About 30 bytes each,
 * so a source can rotate weekly for twenty years before its oldest fingerprint goes;
 * the bound keeps the registry finite all the same. Oldest first; past the bound the
 * oldest goes.
 */
export const RETIRED_KEYS_PER_SOURCE = 1024

/** SHA-256 of the 32 raw public-key bytes, first 16 bytes, base64url: collisions are out of reach. */
export function fingerprint(publicKey: Uint8Array): string {
  return createHash('sha256').update(publicKey).digest().subarray(0, 16).toString('base64url')
}
