import { createHash, generateKeyPairSync, randomBytes, sign } from 'node:crypto'
import t from 'tap'
import type { SignalRecord } from '../../pipeline/index.js'
import { checkpointText, MerkleTree, signNote, verifierKey } from '../../receipt-log/index.js'
import { buildSignal } from '../../receipt-log/leaf-builder.js'
import { signingString } from '../../schemas/index.js'
import { ReceiptVerifyError, verifyReceipt, type ReceiptBundle } from '../../sdk/index.js'

const ORIGIN = 'receipts.example/log'
const rawKey = (k: import('node:crypto').KeyObject) => Buffer.from(k.export({ format: 'jwk' }).x as string, 'base64url')

function logKey() {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519')
  return { name: ORIGIN, publicKey: rawKey(publicKey), privateKey }
}

/** A signal as the creator signed it and the log record ingest wrote for it. */
function signedSignal(n: number): SignalRecord {
  const creator = generateKeyPairSync('ed25519')
  const body = JSON.stringify({ signal_id: `sig_${n}_abcdef`, source_id: 'src_1', ts: '2030-01-02T03:04:05Z', token: 'So11111111111111111111111111111111111111112', severity: 'high', confidence: 70, note: n % 2 === 0 ? 'a note' : undefined })
  const path = '/v1/byo/sources/src_1/signals'
  const timestamp = '1893553445'
  const nonce = `nonce-${n}-${randomBytes(4).toString('hex')}`
  const bodySha256 = createHash('sha256').update(body).digest('hex')
  const signature = sign(null, Buffer.from(signingString('POST', path, timestamp, nonce, bodySha256)), creator.privateKey)
  const parsed = JSON.parse(body) as { note?: string }
  return {
    v: 1, source_id: 'src_1', signal_id: `sig_${n}_abcdef`, key_id: 'key_1', test: false, received_at: '2030-01-02T03:04:06.000Z', emitted_at: '2030-01-02T03:04:05.000Z',
    token: 'So11111111111111111111111111111111111111112', severity: 'high', confidence: 70, note: parsed.note ?? null, idempotency_key: null, body_sha256: bodySha256,
    request_timestamp: timestamp, nonce, signature: signature.toString('base64'), body, method: 'POST', path, public_key: rawKey(creator.publicKey).toString('base64'),
  }
}

const key = logKey()
const tree = new MerkleTree()
const built = Array.from({ length: 6 }, (_, i) => buildSignal(signedSignal(i), i + 1, i, () => undefined))
for (const b of built) tree.append(b.leaf!)
const at = 4
const checkpoint = signNote(checkpointText(ORIGIN, tree.size, tree.root()), [key])
const row = built[at]!.request
const bundle: ReceiptBundle = {
  leaf_index: at,
  leaf: row.leaf,
  inclusion_proof: tree.inclusionProof(at, tree.size).map((h) => h.toString('base64')),
  checkpoint,
  request: { method: row.method, path: row.path, timestamp: row.timestamp, nonce: row.nonce, body: Buffer.from(row.body).toString('base64'), key_id: row.key_id, signature: row.signature, public_key: row.public_key },
  salts: JSON.parse(row.salts),
}
const vkey = verifierKey(ORIGIN, key.publicKey)

t.test('a whole bundle verifies: checkpoint, inclusion, body, creator signature and every commitment', async (t) => {
  const v = verifyReceipt(bundle, { logKey: vkey })
  t.equal(v.creatorSigned, true)
  t.equal(v.leafIndex, at)
  t.same(v.signal, { signal_id: 'sig_4_abcdef', key_id: 'key_1', note: 'a note' })
  t.equal(v.leaf.token, 'So11111111111111111111111111111111111111112')
})

t.test('a public bundle proves inclusion only', async (t) => {
  const { request: _r, salts: _s, ...pub } = bundle
  const v = verifyReceipt(pub, { logKey: vkey })
  t.equal(v.creatorSigned, false)
  t.equal(v.signal, undefined)
})

/** The check that refused `run`'s bundle, or 'accepted'. */
function reasonOf(run: () => unknown): string {
  try {
    run()
    return 'accepted'
  } catch (err) {
    return err instanceof ReceiptVerifyError ? err.reason : `another error: ${(err as Error).message}`
  }
}

const flip = (b64: string, at = 0) => {
  const bytes = Buffer.from(b64, 'base64')
  bytes[at % bytes.length]! ^= 1
  return bytes.toString('base64')
}

/** Every field of the bundle changed, with the check that must refuse it. */
const tampered: Array<[string, ReceiptBundle, string]> = [
  ['leaf_index', { ...bundle, leaf_index: at + 1 }, 'inclusion'],
  ['leaf (a clear field)', { ...bundle, leaf: flip(bundle.leaf, 52) }, 'inclusion'],
  ['leaf (its version)', { ...bundle, leaf: flip(bundle.leaf, 0) }, 'leaf'],
  ['inclusion_proof', { ...bundle, inclusion_proof: [flip(bundle.inclusion_proof[0]!), ...bundle.inclusion_proof.slice(1)] }, 'inclusion'],
  ['inclusion_proof (shortened)', { ...bundle, inclusion_proof: bundle.inclusion_proof.slice(1) }, 'inclusion'],
  ['checkpoint (its size)', { ...bundle, checkpoint: checkpoint.replace(`\n${tree.size}\n`, `\n${tree.size + 1}\n`) }, 'checkpoint_signature'],
  ['checkpoint (its signature)', { ...bundle, checkpoint: checkpoint.replace(/ (\S+)\n$/, (_m, sig: string) => ` ${flip(sig, 10)}\n`) }, 'checkpoint_signature'],
  ['request.method', { ...bundle, request: { ...bundle.request!, method: 'PUT' } }, 'creator_signature'],
  ['request.path', { ...bundle, request: { ...bundle.request!, path: '/v1/byo/sources/src_2/signals' } }, 'creator_signature'],
  ['request.timestamp', { ...bundle, request: { ...bundle.request!, timestamp: '1893553446' } }, 'creator_signature'],
  ['request.nonce', { ...bundle, request: { ...bundle.request!, nonce: 'another-nonce' } }, 'creator_signature'],
  ['request.body', { ...bundle, request: { ...bundle.request!, body: Buffer.from(row.body.replace('high', 'low!')).toString('base64') } }, 'body_hash'],
  ['request.key_id', { ...bundle, request: { ...bundle.request!, key_id: 'key_2' } }, 'leaf'],
  ['request.signature', { ...bundle, request: { ...bundle.request!, signature: flip(bundle.request!.signature, 5) } }, 'creator_signature'],
  ['request.public_key', { ...bundle, request: { ...bundle.request!, public_key: rawKey(generateKeyPairSync('ed25519').publicKey).toString('base64') } }, 'creator_signature'],
  ...(['signal_id', 'key', 'note', 'request', 'body', 'signature'] as const).map(
    (f): [string, ReceiptBundle, string] => [`salts.${f}`, { ...bundle, salts: { ...bundle.salts!, [f]: flip(bundle.salts![f]) } }, f === 'body' ? 'body_hash' : 'leaf'],
  ),
]

t.test('a bundle with any field changed is refused, naming the check', async (t) => {
  for (const [what, b, reason] of tampered) {
    try {
      verifyReceipt(b, { logKey: vkey })
      t.fail(`${what}: accepted`)
    } catch (err) {
      t.ok(err instanceof ReceiptVerifyError, what)
      t.equal((err as ReceiptVerifyError).reason, reason, what)
    }
  }
})

t.test('a bundle signed by another key, or against a checkpoint it is not consistent with, is refused', async (t) => {
  t.equal(reasonOf(() => verifyReceipt(bundle, { logKey: verifierKey(ORIGIN, logKey().publicKey) })), 'checkpoint_signature')
  const bigger = new MerkleTree()
  for (const b of built) bigger.append(b.leaf!)
  bigger.append(Buffer.from('one more'))
  const later = signNote(checkpointText(ORIGIN, bigger.size, bigger.root()), [key])
  const proof = bigger.consistencyProof(tree.size, bigger.size).map((h) => h.toString('base64'))
  t.equal(verifyReceipt(bundle, { logKey: vkey, checkpoint: later, consistencyProof: proof }).leafIndex, at, 'consistent with a later checkpoint')
  const fork = new MerkleTree()
  for (const b of built.slice(0, 5)) fork.append(b.leaf!)
  fork.append(Buffer.from('rewritten'))
  fork.append(Buffer.from('one more'))
  const forked = signNote(checkpointText(ORIGIN, fork.size, fork.root()), [key])
  t.equal(reasonOf(() => verifyReceipt(bundle, { logKey: vkey, checkpoint: forked, consistencyProof: proof })), 'consistency')
})

t.test('during a key rotation a checkpoint signed by both keys verifies with either', async (t) => {
  const next = logKey()
  const both = signNote(checkpointText(ORIGIN, tree.size, tree.root()), [next, key])
  t.equal(verifyReceipt({ ...bundle, checkpoint: both }, { logKey: vkey }).leafIndex, at)
  t.equal(verifyReceipt({ ...bundle, checkpoint: both }, { logKey: verifierKey(ORIGIN, next.publicKey) }).leafIndex, at)
})
