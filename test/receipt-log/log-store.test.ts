import t from 'tap'
import { MerkleTree, ReceiptLogError, ReceiptLogReader, ReceiptLogStore, leafHash } from '../../receipt-log/index.js'
import { checkAgainst, loadLeaves } from '../../receipt-log/tree-loader.js'
import { chdbFolder } from '../helpers/receipts.js'

const folder = await chdbFolder(t)
const receipts = await folder.open()
const store = new ReceiptLogStore({ kind: 'chdb', path: folder.path, maxServerMemoryBytes: 1_000_000_000 }, () => receipts.open())
t.teardown(() => store.close())

const leaf = (i: number) => Buffer.from(`leaf ${i}`)
const requestRow = (receiptId: string, leafIndex: number, bytes: Buffer) => ({
  receipt_id: receiptId, seq: leafIndex + 1, source_id: 'src', test: false, method: 'POST', path: '/p', timestamp: '1', nonce: 'n', body: '{}', key_id: 'k', public_key: '', signature: '',
  leaf_index: leafIndex, leaf: bytes.toString('base64'), salts: '{}',
})

await store.writeRequests([0, 1, 2].map((i) => requestRow(`rc_${i}`, i, leaf(i))))
await store.writeEntries([0, 1, 2].map((i) => ({ leaf_index: i, seq: i + 1, kind: 'signal' as const, entry_id: `rc_${i}`, leaf: leaf(i).toString('base64') })))
const truth = new MerkleTree()
for (const i of [0, 1, 2]) truth.append(leaf(i))

t.test('a receipt whose leaf no checkpoint holds yet is not_yet_logged; once one does, its proof is served', async (t) => {
  const reader = new ReceiptLogReader(store, 0)
  await t.rejects(reader.proof('rc_1'), { code: 'not_yet_logged' })
  await store.writeCheckpoint({ size: 2, root: truth.root(2).toString('base64'), note: 'note of 2', key_ids: ['k1'] })
  t.equal((await reader.proof('rc_1'))?.leafIndex, 1)
  await t.rejects(reader.proof('rc_2'), { code: 'not_yet_logged' }, 'its leaf is past the checkpoint')
})

t.test('a row written again by a sequencer killed between its two inserts is passed over: the row whose leaf is logged wins', async (t) => {
  await store.writeRequests([requestRow('rc_1', 1, Buffer.from('a leaf no tree holds'))])
  const reader = new ReceiptLogReader(store, 0)
  const proof = await reader.proof('rc_1')
  t.equal(proof?.leaf.toString(), 'leaf 1')
})

t.test('the tree rebuilt from the store must hash to every published checkpoint, or nothing more is signed', async (t) => {
  const tree = new MerkleTree()
  t.equal(await loadLeaves(store, tree), 3, 'the seq of the last leaf')
  t.equal(tree.root().toString('hex'), truth.root().toString('hex'))
  t.doesNotThrow(() => checkAgainst(tree, { size: 2, root: truth.root(2).toString('base64'), note: '', key_ids: [] }))
  t.throws(() => checkAgainst(tree, { size: 2, root: truth.root(3).toString('base64'), note: '', key_ids: [] }), ReceiptLogError)
  t.throws(() => checkAgainst(tree, { size: 4, root: truth.root(3).toString('base64'), note: '', key_ids: [] }), { code: 'log_inconsistent' }, 'a checkpoint larger than the stored leaves')
})

t.test('a reader refuses to serve a checkpoint its copy of the leaves does not hash to', async (t) => {
  await store.writeCheckpoint({ size: 3, root: leafHash(leaf(9)).toString('base64'), note: 'forged', key_ids: ['k1'] })
  const reader = new ReceiptLogReader(store, 0)
  await t.rejects(reader.latest(), { code: 'log_inconsistent' })
})

t.test('the first checkpoint of a size is that size\'s for good, and each key\'s signed sizes are counted', async (t) => {
  await store.writeCheckpoint({ size: 2, root: 'x', note: 'a later one of size 2', key_ids: ['k2'] })
  const sizes = await store.keySizes()
  t.same(sizes.sort((a, b) => a.key_id.localeCompare(b.key_id)), [
    { key_id: 'k1', first_size: 2, last_size: 3, checkpoints: 2 },
    { key_id: 'k2', first_size: 2, last_size: 2, checkpoints: 1 },
  ])
  t.equal(leafHash(leaf(0)).length, 32)
})
