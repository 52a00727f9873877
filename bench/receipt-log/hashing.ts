import { createHash, randomBytes } from 'node:crypto'
import type { SignalRecord } from '../../pipeline/index.js'
import { MerkleTree } from '../../receipt-log/index.js'
import { buildSignal } from '../../receipt-log/leaf-builder.js'

/** A signal record as ingest writes it, with a body of the usual size (about 250 bytes). */
function record(i: number): SignalRecord {
  const body = JSON.stringify({ signal_id: `sig_${i}_bench`, source_id: 'src_bench', ts: '2030-01-02T03:04:05.000Z', token: 'So11111111111111111111111111111111111111112', severity: 'warning', confidence: 80, note: 'large transfer to a fresh wallet' })
  return {
    v: 1, source_id: 'src_bench', signal_id: `sig_${i}_bench`, key_id: 'key_bench', test: false, received_at: '2030-01-02T03:04:06.000Z', emitted_at: '2030-01-02T03:04:05.000Z',
    token: 'So11111111111111111111111111111111111111112', severity: 'warning', confidence: 80, note: 'large transfer to a fresh wallet', idempotency_key: null,
    body_sha256: createHash('sha256').update(body).digest('hex'), request_timestamp: '2030-01-02T03:04:05Z', nonce: randomBytes(12).toString('hex'),
    signature: randomBytes(64).toString('base64'), body, method: 'POST', path: '/v1/byo/sources/src_bench/signals', public_key: randomBytes(32).toString('base64'),
  }
}

/**
 * What the sequencer spends per signal on one core: the leaf built (six salts, six
 * commitments, the encoding) and appended to the tree, and the tree append alone; plus
 * a root and an inclusion proof at the final size.
 */
export function hashingRates(leaves: number): { build_and_append_per_s: number; append_per_s: number; sha256_per_s: number; root_us: number; proof_us: number; leaf_bytes: number } {
  // The ceiling, measured in the same run: SHA-256 of a 64-byte input (an inner node's size).
  const block = Buffer.alloc(64)
  let s = performance.now()
  for (let i = 0; i < 100_000; i++) createHash('sha256').update(block).digest()
  const sha256PerS = Math.round(100_000 / ((performance.now() - s) / 1000))
  const records = Array.from({ length: leaves }, (_, i) => record(i))
  const tree = new MerkleTree()
  let leafBytes = 0
  let t = performance.now()
  records.forEach((r, i) => {
    const built = buildSignal(r, i + 1, i, () => undefined)
    leafBytes = built.leaf!.length
    tree.append(built.leaf!)
  })
  const buildS = (performance.now() - t) / 1000
  const hashes = Array.from({ length: leaves }, () => randomBytes(32))
  const bare = new MerkleTree()
  t = performance.now()
  for (const h of hashes) bare.appendHash(h)
  const appendS = (performance.now() - t) / 1000
  t = performance.now()
  for (let i = 0; i < 1000; i++) tree.root(leaves - i)
  const rootUs = ((performance.now() - t) / 1000) * 1000
  t = performance.now()
  for (let i = 0; i < 1000; i++) tree.inclusionProof((i * 7919) % leaves, leaves)
  const proofUs = ((performance.now() - t) / 1000) * 1000
  return { build_and_append_per_s: Math.round(leaves / buildS), append_per_s: Math.round(leaves / appendS), sha256_per_s: sha256PerS, root_us: Number(rootUs.toFixed(1)), proof_us: Number(proofUs.toFixed(1)), leaf_bytes: leafBytes }
}
