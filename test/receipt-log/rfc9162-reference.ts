import { createHash } from 'node:crypto'

/**
 * A second Merkle tree written from RFC 9162 section 2.1 alone, as plainly as the RFC
 * states it (recursion over lists of entries, no caching), with node:crypto and nothing
 * of the service or the SDK: the service's tree and the SDK's verifiers are checked
 * against it.
 */

const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash('sha256')
  for (const p of parts) h.update(p)
  return h.digest()
}

/** k: the largest power of two smaller than n (n > 1). */
function largestPowerOfTwoBelow(n: number): number {
  let k = 1
  while (k << 1 < n) k <<= 1
  return k
}

/** MTH(D[n]). */
export function mth(d: readonly Uint8Array[]): Buffer {
  if (d.length === 0) return sha256()
  if (d.length === 1) return sha256(Buffer.from([0x00]), d[0]!)
  const k = largestPowerOfTwoBelow(d.length)
  return sha256(Buffer.from([0x01]), mth(d.slice(0, k)), mth(d.slice(k)))
}

/** PATH(m, D[n]): the inclusion proof. */
export function path(m: number, d: readonly Uint8Array[]): Buffer[] {
  if (d.length <= 1) return []
  const k = largestPowerOfTwoBelow(d.length)
  if (m < k) return [...path(m, d.slice(0, k)), mth(d.slice(k))]
  return [...path(m - k, d.slice(k)), mth(d.slice(0, k))]
}

function subproof(m: number, d: readonly Uint8Array[], b: boolean): Buffer[] {
  if (m === d.length) return b ? [] : [mth(d)]
  const k = largestPowerOfTwoBelow(d.length)
  if (m <= k) return [...subproof(m, d.slice(0, k), b), mth(d.slice(k))]
  return [...subproof(m - k, d.slice(k), false), mth(d.slice(0, k))]
}

/** PROOF(m, D[n]): the consistency proof. */
export function proof(m: number, d: readonly Uint8Array[]): Buffer[] {
  return subproof(m, d, true)
}
