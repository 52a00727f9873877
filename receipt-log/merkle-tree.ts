import { createHash } from 'node:crypto'

/**
 * The receipt log's Merkle tree, hashed as RFC 6962 / RFC 9162 section 2.1 say: a leaf's
 * hash is SHA-256(0x00 || leaf), an inner node's SHA-256(0x01 || left || right), and a
 * tree of n leaves splits at the largest power of two below n. The two prefixes keep a
 * leaf from ever passing for a node (a second-preimage attack on the tree).
 *
 * Held in memory as every complete, aligned subtree: level 0 the leaf hashes, level k the
 * hashes of the 2^k-leaf subtrees starting at multiples of 2^k. That is 2n hashes (64
 * bytes a leaf), and it is all the RFC's recursions ever need: the left part of every
 * split is such a subtree, so a root, an inclusion proof or a consistency proof of any
 * size up to n costs O(log n) hashes. The same levels are the C2SP tlog-tiles hash tiles:
 * tile level L holds tree level 8·L.
 */

export const HASH_BYTES = 32

export function leafHash(leaf: Uint8Array): Buffer {
  return createHash('sha256').update(LEAF_PREFIX).update(leaf).digest()
}

export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return createHash('sha256').update(NODE_PREFIX).update(left).update(right).digest()
}

const LEAF_PREFIX = Buffer.from([0])
const NODE_PREFIX = Buffer.from([1])
const EMPTY_ROOT = createHash('sha256').digest()

/** The largest power of two strictly below n (n ≥ 2): where RFC 9162 splits a tree. */
export function splitPoint(n: number): number {
  let k = 1
  while (k * 2 < n) k *= 2
  return k
}

/** One level of complete subtrees: their hashes back to back in a buffer that doubles as it fills. */
class Level {
  #bytes = Buffer.alloc(HASH_BYTES * 1024)
  length = 0

  push(hash: Uint8Array): void {
    if ((this.length + 1) * HASH_BYTES > this.#bytes.length) {
      const bigger = Buffer.alloc(this.#bytes.length * 2)
      this.#bytes.copy(bigger, 0, 0, this.length * HASH_BYTES)
      this.#bytes = bigger
    }
    this.#bytes.set(hash, this.length * HASH_BYTES)
    this.length++
  }

  at(i: number): Buffer {
    return this.#bytes.subarray(i * HASH_BYTES, (i + 1) * HASH_BYTES)
  }

  /** Hashes i to i + count - 1 as one copy (a hash tile). */
  slice(i: number, count: number): Buffer {
    return Buffer.from(this.#bytes.subarray(i * HASH_BYTES, (i + count) * HASH_BYTES))
  }
}

export class MerkleTree {
  readonly #levels: Level[] = [new Level()]

  get size(): number {
    return this.#levels[0]!.length
  }

  /** Appends a leaf by its hash (leafHash of its bytes). */
  appendHash(hash: Uint8Array): void {
    if (hash.length !== HASH_BYTES) throw new RangeError('a leaf hash is 32 bytes')
    let level = 0
    let h: Uint8Array = hash
    for (;;) {
      const l = this.#levels[level]!
      l.push(h)
      // A new complete subtree one level up once this level has an even count.
      if (l.length % 2 !== 0) return
      h = nodeHash(l.at(l.length - 2), l.at(l.length - 1))
      level++
      if (this.#levels[level] === undefined) this.#levels.push(new Level())
    }
  }

  append(leaf: Uint8Array): number {
    this.appendHash(leafHash(leaf))
    return this.size - 1
  }

  leafHashAt(index: number): Buffer {
    this.#check(index, index + 1)
    return this.#levels[0]!.at(index)
  }

  /** Complete subtrees of level `level` available: hash tiles are cut from them. */
  levelLength(level: number): number {
    return this.#levels[level]?.length ?? 0
  }

  /** `count` hashes of tree level `level` from index `start`, back to back. */
  levelSlice(level: number, start: number, count: number): Buffer {
    const l = this.#levels[level]
    if (l === undefined || start < 0 || count < 0 || start + count > l.length) throw new RangeError(`level ${level} holds no hashes ${start} to ${start + count - 1}`)
    return l.slice(start, count)
  }

  /** MTH of leaves [start, end): RFC 9162 section 2.1.1. */
  #hash(start: number, end: number): Buffer {
    const n = end - start
    if (n === 0) return EMPTY_ROOT
    // A complete, aligned subtree is stored.
    if ((n & (n - 1)) === 0 && start % n === 0) return this.#levels[Math.log2(n)]!.at(start / n)
    const k = splitPoint(n)
    return nodeHash(this.#hash(start, start + k), this.#hash(start + k, end))
  }

  #check(from: number, to: number): void {
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to < from || to > this.size) {
      throw new RangeError(`the tree holds ${this.size} leaves, not [${from}, ${to})`)
    }
  }

  /** The root hash of the tree's first `size` leaves. */
  root(size = this.size): Buffer {
    this.#check(0, size)
    return this.#hash(0, size)
  }

  /** The inclusion proof of leaf `index` in the tree of `size` leaves (RFC 9162 section 2.1.3.1), leaf side first. */
  inclusionProof(index: number, size: number): Buffer[] {
    this.#check(index, size)
    if (index >= size) throw new RangeError(`leaf ${index} is not in a tree of ${size}`)
    const proof: Buffer[] = []
    const walk = (m: number, start: number, end: number): void => {
      const n = end - start
      if (n <= 1) return
      const k = splitPoint(n)
      if (m < k) {
        walk(m, start, start + k)
        proof.push(this.#hash(start + k, end))
      } else {
        walk(m - k, start + k, end)
        proof.push(this.#hash(start, start + k))
      }
    }
    walk(index, 0, size)
    return proof
  }

  /** The consistency proof from the tree of `from` leaves to that of `to` (RFC 9162 section 2.1.4.1). Empty when from is 0 or from equals to. */
  consistencyProof(from: number, to: number): Buffer[] {
    this.#check(from, to)
    if (from === 0 || from === to) return []
    const proof: Buffer[] = []
    const subproof = (m: number, start: number, end: number, whole: boolean): void => {
      const n = end - start
      if (m === n) {
        if (!whole) proof.push(this.#hash(start, end))
        return
      }
      const k = splitPoint(n)
      if (m <= k) {
        subproof(m, start, start + k, whole)
        proof.push(this.#hash(start + k, end))
      } else {
        subproof(m - k, start + k, end, false)
        proof.push(this.#hash(start, start + k))
      }
    }
    subproof(from, 0, to, true)
    return proof
  }
}
