import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import type { DisputeRecord } from '../../registry/index.js'
import { MANIFEST } from '../helpers/api.js'
import { openRegistry, registryBucket, type TapLike } from '../helpers/registry-bucket.js'

/**
 * Two registries on one bucket: two processes sharing the registry. What one changes
 * reaches the other through the bucket's watch, and what must hold between them rests on
 * the bucket's create-if-absent and expected revisions, not on either one's index.
 */

const rawKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
const LISTING = { public_receipts: false }

/** Resolves once `check` holds, polling each millisecond; fails the test past 2 s. */
async function until(check: () => boolean): Promise<number> {
  const start = Date.now()
  while (!check()) {
    if (Date.now() - start > 2000) throw new Error('not seen within 2 s')
    await new Promise((r) => setTimeout(r, 1))
  }
  return Date.now() - start
}

async function pair(t: TapLike) {
  const bucket = await registryBucket(t)
  return { bucket, a: await openRegistry(t, bucket), b: await openRegistry(t, bucket) }
}

t.test("a token revoked on one process is refused on the other, whose revocation watchers are told", async (t) => {
  const { a, b } = await pair(t)
  const { token, record } = await a.createToken('renter', 'r1')
  await until(() => b.authenticate(token) !== undefined)
  const principal = b.authenticate(token)!
  const told: string[] = []
  b.watchRevocations((ids) => told.push(...ids))
  await a.revokeToken(record.token_id)
  const ms = await until(() => told.length > 0)
  t.same(told, [record.token_id], `told within ${ms} ms`)
  t.equal(b.authenticate(token), undefined)
  t.notOk(b.stillAuthenticated(principal), 'a request authenticated before it learns of it')
  t.notOk(b.tokenLive(record.token_id))
  // Through the watch, not at a poll's or a lease's pace (loosely: the machine may be loaded).
  t.ok(ms < 2_000, `within ${ms} ms`)
})

t.test('a key revoked on one process is revoked in the key object a request on the other holds', async (t) => {
  const { a, b } = await pair(t)
  const agent = await a.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await a.createSource({ agent, manifest: MANIFEST as any, listing: LISTING })
  const key = await a.addKey(source.source_id, rawKey())
  await until(() => b.key(source.source_id, key.key_id) !== undefined)
  const held = b.key(source.source_id, key.key_id)!
  await a.revokeKey(source.source_id, key.key_id, 'compromise')
  await until(() => held.record.state === 'revoked')
  t.equal(held.record.revocation_reason, 'compromise')
})

t.test("disputes opened and decided on one process reach the other's dispute watchers", async (t) => {
  const { a, b } = await pair(t)
  const agent = await a.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await a.createSource({ agent, manifest: MANIFEST as any, listing: LISTING })
  const key = await a.addKey(source.source_id, rawKey())
  await a.revokeKey(source.source_id, key.key_id)
  const seen: DisputeRecord[] = []
  b.watchDisputes((changed) => seen.push(...changed))
  const opened = await a.openDispute({ source, keyId: key.key_id, signals: [{ signal_id: 'sig_00000001', received_at: source.created_at, seq: 4 }], evidence: 'leaked', openedBy: 'c1' })
  await a.resolveDispute(source.source_id, opened.dispute_id, 'accepted', null, 9)
  await until(() => seen.length === 2)
  t.same(seen.map((d) => d.state), ['open', 'accepted'])
  t.equal(b.disputeOf(source.source_id, 'sig_00000001'), opened.dispute_id)
  t.match(b.acceptedDisputesOf(source.source_id), [{ after_seq: 9, accept_order: 1 }])
})

t.test('two processes filling the last slot of an agent at once: one source is created, the other is refused no_open_slot', async (t) => {
  const { a, b } = await pair(t)
  const agent = await a.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  await until(() => b.agent('a1') !== undefined)
  const results = await Promise.allSettled([a.createSource({ agent, manifest: MANIFEST as any, listing: LISTING }), b.createSource({ agent, manifest: MANIFEST as any, listing: LISTING })])
  t.same(results.map((r) => r.status).sort(), ['fulfilled', 'rejected'])
  t.match(results.find((r) => r.status === 'rejected'), { reason: { code: 'no_open_slot' } })
  await until(() => a.sourcesOfAgent('a1').length === 1 && b.sourcesOfAgent('a1').length === 1)
  t.equal(a.slotsUsed('a1'), 1)
  t.equal(b.slotsUsed('a1'), 1)
})

t.test('two processes creating one agent id at once: one wins, the other gets already_exists', async (t) => {
  const { a, b } = await pair(t)
  const results = await Promise.allSettled([a.createAgent({ agent_id: 'same', creator_id: 'c1', slots: 1 }), b.createAgent({ agent_id: 'same', creator_id: 'c2', slots: 1 })])
  t.same(results.map((r) => r.status).sort(), ['fulfilled', 'rejected'])
  t.match(results.find((r) => r.status === 'rejected'), { reason: { code: 'already_exists' } })
})

t.test('two processes promoting two keys of one source at once: one source, one active key', async (t) => {
  const { a, b } = await pair(t)
  const agent = await a.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await a.createSource({ agent, manifest: MANIFEST as any, listing: LISTING })
  const k1 = await a.addKey(source.source_id, rawKey())
  const k2 = await a.addKey(source.source_id, rawKey())
  await a.markTested(source.source_id, k1.key_id)
  await a.markTested(source.source_id, k2.key_id)
  await until(() => b.key(source.source_id, k2.key_id)?.record.tested_at !== null)
  await Promise.all([a.promoteKey(source.source_id, k1.key_id), b.promoteKey(source.source_id, k2.key_id)])
  await until(() => a.keysOf(source.source_id).every((k, i) => k.state === b.keysOf(source.source_id)[i]?.state))
  t.same(a.keysOf(source.source_id).map((k) => k.state).sort(), ['active', 'grace'], 'the promotion written second moved the first to grace')
})
