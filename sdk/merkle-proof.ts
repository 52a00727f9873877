import { sha256 } from '@noble/hashes/sha2.js'

/**
 * RFC 9162 section 2.1 proofs checked offline: a leaf's hash is SHA-256(0x00 || leaf), a
 * node's SHA-256(0x01 || left || right). Sizes and indexes are whole numbers below 2^53;
 * the halvings are divisions, not 32-bit shifts.
 */

const join = (prefix: number, a: Uint8Array, b?: Uint8Array): Uint8Array => {
  const out = new Uint8Array(1 + a.length + (b?.length ?? 0))
  out[0] = prefix
  out.set(a, 1)
  if (b !== undefined) out.set(b, 1 + a.length)
  return out
}

export const merkleLeafHash = (leaf: Uint8Array): Uint8Array => sha256(join(0, leaf))
export const merkleNodeHash = (left: Uint8Array, right: Uint8Array): Uint8Array => sha256(join(1, left, right))

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])
const odd = (n: number) => n % 2 === 1
const half = (n: number) => Math.floor(n / 2)
const wholeNumber = (n: number) => Number.isSafeInteger(n) && n >= 0

/** The root an inclusion proof leads to (RFC 9162 section 2.1.3.2), or undefined when the proof does not fit the index and size. */
export function rootFromInclusionProof(leafIndex: number, treeSize: number, leafHash: Uint8Array, proof: readonly Uint8Array[]): Uint8Array | undefined {
  if (!wholeNumber(leafIndex) || !wholeNumber(treeSize) || leafIndex >= treeSize) return undefined
  let fn = leafIndex
  let sn = treeSize - 1
  let r = leafHash
  for (const p of proof) {
    if (p.length !== 32 || sn === 0) return undefined
    if (odd(fn) || fn === sn) {
      r = merkleNodeHash(p, r)
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn)
          sn = half(sn)
        }
      }
    } else {
      r = merkleNodeHash(r, p)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return sn === 0 ? r : undefined
}

export function verifyInclusion(leafIndex: number, treeSize: number, leafHash: Uint8Array, proof: readonly Uint8Array[], root: Uint8Array): boolean {
  const r = rootFromInclusionProof(leafIndex, treeSize, leafHash, proof)
  return r !== undefined && equal(r, root)
}

/** Whether `proof` shows the tree of `size1` leaves with root `root1` is a prefix of that of `size2` with `root2` (RFC 9162 section 2.1.4.2). */
export function verifyConsistency(size1: number, size2: number, root1: Uint8Array, root2: Uint8Array, proof: readonly Uint8Array[]): boolean {
  if (!wholeNumber(size1) || !wholeNumber(size2) || size1 > size2) return false
  if (proof.some((p) => p.length !== 32)) return false
  if (size1 === size2) return proof.length === 0 && equal(root1, root2)
  // Every tree extends the empty one; there is nothing to prove.
  if (size1 === 0) return proof.length === 0
  if (proof.length === 0) return false
  // A first tree of a power-of-two size is a node of the second: its root starts the path.
  const path = Number.isInteger(Math.log2(size1)) ? [root1, ...proof] : [...proof]
  let fn = size1 - 1
  let sn = size2 - 1
  while (odd(fn)) {
    fn = half(fn)
    sn = half(sn)
  }
  let fr = path[0]!
  let sr = path[0]!
  for (const c of path.slice(1)) {
    if (sn === 0) return false
    if (odd(fn) || fn === sn) {
      fr = merkleNodeHash(c, fr)
      sr = merkleNodeHash(c, sr)
      if (!odd(fn)) {
        while (!odd(fn) && fn !== 0) {
          fn = half(fn)
          sn = half(sn)
        }
      }
    } else {
      sr = merkleNodeHash(sr, c)
    }
    fn = half(fn)
    sn = half(sn)
  }
  return equal(fr, root1) && equal(sr, root2) && sn === 0
}
