import { randomBytes } from 'node:crypto'
import t from 'tap'
import { MerkleTree } from '../../receipt-log/index.js'
import { merkleLeafHash, rootFromInclusionProof, verifyConsistency, verifyInclusion } from '../../sdk/index.js'
import { mth, path, proof } from './rfc9162-reference.js'

const leaves = Array.from({ length: 70 }, (_, i) => randomBytes(i % 7))
const tree = new MerkleTree()
for (const l of leaves) tree.append(l)
const hex = (hs: readonly Uint8Array[]) => hs.map((h) => Buffer.from(h).toString('hex'))

t.test('the tree\'s root of every size equals MTH of the RFC 9162 reference', async (t) => {
  for (let n = 0; n <= leaves.length; n++) t.equal(tree.root(n).toString('hex'), mth(leaves.slice(0, n)).toString('hex'), `size ${n}`)
})

t.test('inclusion proofs equal the reference\'s PATH, and the SDK verifies them and refuses any change', async (t) => {
  for (const n of [1, 2, 3, 5, 8, 13, 31, 32, 33, 64, 70]) {
    for (let m = 0; m < n; m++) {
      const p = tree.inclusionProof(m, n)
      t.same(hex(p), hex(path(m, leaves.slice(0, n))), `leaf ${m} of ${n}`)
      const root = mth(leaves.slice(0, n))
      if (!verifyInclusion(m, n, merkleLeafHash(leaves[m]!), p, root)) t.fail(`SDK refused leaf ${m} of ${n}`)
      if (n > 1 && verifyInclusion(m, n, merkleLeafHash(leaves[(m + 1) % n]!), p, root) && !leaves[m]!.equals(leaves[(m + 1) % n]!)) t.fail('another leaf passed')
      if (verifyInclusion(m + 1 === n ? m - 1 : m + 1, n, merkleLeafHash(leaves[m]!), p, root) && n > 1) t.fail(`leaf ${m} passed at another index of ${n}`)
      if (p.length > 0) {
        const bent = p.map((h, i) => (i === p.length - 1 ? Buffer.from(h.map((b, j) => (j === 0 ? b ^ 1 : b))) : h))
        if (verifyInclusion(m, n, merkleLeafHash(leaves[m]!), bent, root)) t.fail('a changed proof passed')
        if (verifyInclusion(m, n, merkleLeafHash(leaves[m]!), p.slice(0, -1), root)) t.fail('a shortened proof passed')
      }
    }
  }
  t.equal(rootFromInclusionProof(3, 3, merkleLeafHash(leaves[0]!), []), undefined, 'an index past the size has no root')
})

t.test('consistency proofs equal the reference\'s PROOF, and the SDK verifies them and refuses a fork', async (t) => {
  for (const n of [1, 2, 3, 4, 7, 8, 9, 16, 17, 33, 64, 70]) {
    for (let m = 1; m <= n; m++) {
      const p = tree.consistencyProof(m, n)
      t.same(hex(p), hex(m === n ? [] : proof(m, leaves.slice(0, n))), `${m} to ${n}`)
      const [r1, r2] = [mth(leaves.slice(0, m)), mth(leaves.slice(0, n))]
      if (!verifyConsistency(m, n, r1, r2, p)) t.fail(`SDK refused ${m} to ${n}`)
      if (m < n) {
        const forked = [...leaves.slice(0, m - 1), randomBytes(3), ...leaves.slice(m, n)]
        if (verifyConsistency(m, n, r1, mth(forked), p)) t.fail(`a fork passed ${m} to ${n}`)
        if (verifyConsistency(m, n, mth(forked.slice(0, m)), r2, p)) t.fail(`a forked first tree passed ${m} to ${n}`)
      }
    }
  }
  t.ok(verifyConsistency(0, 5, mth([]), mth(leaves.slice(0, 5)), []), 'every tree extends the empty one')
  t.notOk(verifyConsistency(5, 4, mth(leaves.slice(0, 5)), mth(leaves.slice(0, 4)), []), 'a tree does not shrink')
})

t.test('the levels hold every complete aligned subtree: hash tiles are cut from them', async (t) => {
  t.equal(tree.levelLength(0), 70)
  t.equal(tree.levelLength(3), 8)
  t.equal(tree.levelSlice(3, 1, 1).toString('hex'), mth(leaves.slice(8, 16)).toString('hex'))
  t.throws(() => tree.levelSlice(3, 8, 1), RangeError)
})
