import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { migrateLegacyRegistry, REGISTRY_LIMITS } from '../../registry/index.js'
import { MANIFEST } from '../helpers/api.js'
import { fileRegistryBuckets, openRegistry, registryBucket, storedEntries, type TapLike } from '../helpers/registry-bucket.js'

const rawKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
const manifest = (overrides: Record<string, unknown> = {}) => ({ ...structuredClone(MANIFEST), ...overrides }) as any
const LISTING = { public_receipts: false }

async function setup(t: TapLike, slots = 2) {
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store)
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots })
  const source = await registry.createSource({ agent, manifest: manifest(), listing: LISTING })
  return { store, registry, agent, source }
}

t.test('a retired source frees its slot, is no longer a live source, and stays readable; retiring again records nothing', async (t) => {
  const { store, registry, agent, source } = await setup(t, 1)
  await t.rejects(registry.createSource({ agent, manifest: manifest(), listing: LISTING }), { code: 'no_open_slot' })
  const retired = await registry.retireSource(source.source_id)
  t.type(retired.retired_at, 'string')
  t.equal(registry.slotsUsed('a1'), 0, 'the slot is free')
  t.equal(registry.source(source.source_id), undefined, 'ingest finds no such source')
  t.same(registry.anySource(source.source_id), { ...source, retired_at: retired.retired_at }, 'the record is still there to read')
  const next = await registry.createSource({ agent, manifest: manifest(), listing: LISTING })
  t.equal(registry.slotsUsed('a1'), 1)
  t.same(registry.sourcesOfAgent('a1').map((s) => s.source_id), [source.source_id, next.source_id], "the agent's list keeps the retired source")
  t.same(registry.sourcesOfCreator('c1').map((s) => s.source_id), [source.source_id, next.source_id])
  const appends = store.writes
  const again = await registry.retireSource(source.source_id)
  t.equal(again.retired_at, retired.retired_at, 'the first time stands')
  t.equal(store.writes, appends, 'and nothing new is recorded')
  await t.rejects(registry.retireSource('src_nothing'), { code: 'not_found' })
})

t.test('a retired source takes no new key, promotion or manifest (409 source_retired); a key of it can still be revoked', async (t) => {
  const { registry, source } = await setup(t)
  const key = await registry.addKey(source.source_id, rawKey())
  await registry.markTested(source.source_id, key.key_id)
  await registry.retireSource(source.source_id)
  await t.rejects(registry.addKey(source.source_id, rawKey()), { code: 'source_retired' })
  await t.rejects(registry.promoteKey(source.source_id, key.key_id), { code: 'source_retired' })
  await t.rejects(registry.updateSource(source.source_id, { listing: { public_receipts: true } }), { code: 'source_retired' })
  t.equal(registry.key(source.source_id, key.key_id)?.record.state, 'pending', 'the refused promotion changed nothing')
  const revoked = await registry.revokeKey(source.source_id, key.key_id, 'compromise')
  t.match(revoked, { state: 'revoked', revocation_reason: 'compromise' })
})

t.test("an agent's slots change, never below those its live sources take (409 slots_in_use)", async (t) => {
  const { registry, agent } = await setup(t, 3)
  const second = await registry.createSource({ agent, manifest: manifest(), listing: LISTING })
  await t.rejects(registry.setAgentSlots('a1', 1), { code: 'slots_in_use', message: /2 sources/ })
  t.equal(registry.agent('a1')?.slots, 3, 'unchanged')
  t.equal((await registry.setAgentSlots('a1', 2)).slots, 2, 'down to the slots in use')
  await t.rejects(registry.createSource({ agent, manifest: manifest(), listing: LISTING }), { code: 'no_open_slot' }, 'the route’s agent record sees the change')
  await registry.retireSource(second.source_id)
  t.equal((await registry.setAgentSlots('a1', 1)).slots, 1, 'a retired source holds no slot')
  t.equal((await registry.setAgentSlots('a1', 10)).slots, 10)
  await t.rejects(registry.setAgentSlots('nobody', 1), { code: 'not_found' })
  t.same([...registry.agents()].map((a) => a.agent_id), ['a1'])
})

t.test('a source update replaces the manifest and listing and records when; archetype and schema_version are kept for life', async (t) => {
  const { registry, source } = await setup(t)
  // Read again after each change: the record is replaced, not changed in place (a request in flight reads it again, ingest-source-changes.test.ts).
  const held = { get manifest() { return registry.source(source.source_id)!.manifest }, get listing() { return registry.source(source.source_id)!.listing }, get updated_at() { return registry.source(source.source_id)!.updated_at } }
  t.equal(held.updated_at, null, 'never changed yet')
  const slower = manifest({ max_rate: { rate: 1, per: 'second', burst: 1 }, severity_levels: ['low'] })
  await registry.updateSource(source.source_id, { manifest: slower })
  t.same(held.manifest.max_rate, { rate: 1, per: 'second', burst: 1 }, 'a request reading the source again sees the new max_rate')
  t.same(held.manifest.severity_levels, ['low'])
  t.type(held.updated_at, 'string')
  t.same(held.listing, LISTING, 'the listing was not given and is kept')
  await registry.updateSource(source.source_id, { listing: { public_receipts: true } })
  t.same(held.listing, { public_receipts: true })
  t.same(held.manifest.severity_levels, ['low'], 'the manifest was not given and is kept')
  await t.rejects(registry.updateSource(source.source_id, { manifest: manifest({ archetype: 'other-kind' }) }), { code: 'invalid_manifest', message: /manifest\.archetype cannot change/ })
  await t.rejects(registry.updateSource('src_nothing', { listing: LISTING }), { code: 'not_found' })
})

t.test('a change that cannot be saved is undone: retirement, update and slots alike', async (t) => {
  const { store, registry, agent, source } = await setup(t, 1)
  store.failNext = true
  await t.rejects(registry.retireSource(source.source_id), { code: 'io' })
  t.equal(registry.source(source.source_id)?.retired_at, null, 'still live')
  t.equal(registry.slotsUsed('a1'), 1, 'and on its slot')
  await t.rejects(registry.createSource({ agent, manifest: manifest(), listing: LISTING }), { code: 'no_open_slot' })
  store.failNext = true
  await t.rejects(registry.updateSource(source.source_id, { manifest: manifest({ contact: 'new@example.com' }) }), { code: 'io' })
  t.equal(registry.source(source.source_id)?.manifest.contact, MANIFEST.contact)
  t.equal(registry.source(source.source_id)?.updated_at, null)
  store.failNext = true
  await t.rejects(registry.setAgentSlots('a1', 5), { code: 'io' })
  t.equal(registry.agent('a1')?.slots, 1)
  t.equal((await storedEntries(store)).get(`agent.${Buffer.from('a1').toString('base64url')}`)?.agent.slots, 1, 'disk unchanged')
})

t.test('a revocation reason is kept; a later revocation may add one or turn rotation into compromise, never back', async (t) => {
  const { store, registry, source } = await setup(t)
  const plain = await registry.addKey(source.source_id, rawKey())
  t.equal(plain.revocation_reason, null)
  await registry.revokeKey(source.source_id, plain.key_id)
  t.equal(registry.key(source.source_id, plain.key_id)?.record.revocation_reason, null, 'no reason given')
  const first = registry.key(source.source_id, plain.key_id)!.record.revoked_at
  await registry.revokeKey(source.source_id, plain.key_id, 'rotation')
  t.equal(registry.key(source.source_id, plain.key_id)?.record.revocation_reason, 'rotation', 'added later')
  await registry.revokeKey(source.source_id, plain.key_id, 'compromise')
  t.equal(registry.key(source.source_id, plain.key_id)?.record.revocation_reason, 'compromise', 'a leak found after the rotation')
  t.equal(registry.key(source.source_id, plain.key_id)?.record.revoked_at, first, 'the revocation time stands')
  await t.rejects(registry.revokeKey(source.source_id, plain.key_id, 'rotation'), { code: 'invalid_key_state', message: /compromise/ })
  const appends = store.writes
  await registry.revokeKey(source.source_id, plain.key_id)
  await registry.revokeKey(source.source_id, plain.key_id, 'compromise')
  t.equal(store.writes, appends, 'a repeat that changes nothing records nothing')
  const reopened = await openRegistry(t, store)
  t.equal(reopened.key(source.source_id, plain.key_id)?.record.revocation_reason, 'compromise')
})

t.test('an agent keeps a bounded number of retired sources: past it a new source is refused with limit_exceeded', async (t) => {
  const { registry, agent, source } = await setup(t, 1)
  await registry.retireSource(source.source_id)
  for (let i = 1; i < REGISTRY_LIMITS.retiredSourcesPerAgent; i++) {
    await registry.retireSource((await registry.createSource({ agent, manifest: manifest(), listing: LISTING })).source_id)
  }
  t.equal(registry.slotsUsed('a1'), 0)
  await t.rejects(registry.createSource({ agent, manifest: manifest(), listing: LISTING }), { code: 'limit_exceeded', message: /retired sources/ })
  const other = await registry.createAgent({ agent_id: 'a2', creator_id: 'c1', slots: 1 })
  t.ok(await registry.createSource({ agent: other, manifest: manifest(), listing: LISTING }), 'another agent is not held back')
})

async function folder(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-registry-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

t.test('retirement, a new manifest, slots and revocation reasons survive a restart from the bucket files', async (t) => {
  const open = await fileRegistryBuckets(t)
  const bucket = await registryBucket(t, open)
  const registry = await openRegistry(t, bucket)
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 2 })
  const kept = await registry.createSource({ agent, manifest: manifest(), listing: LISTING })
  const gone = await registry.createSource({ agent, manifest: manifest(), listing: LISTING })
  await registry.updateSource(kept.source_id, { manifest: manifest({ severity_levels: ['low'] }), listing: { public_receipts: true } })
  const key = await registry.addKey(kept.source_id, rawKey())
  await registry.revokeKey(kept.source_id, key.key_id, 'rotation')
  await registry.retireSource(gone.source_id)
  await registry.setAgentSlots('a1', 1)
  await registry.close()
  await bucket.close()
  const reopened = await openRegistry(t, await registryBucket(t, open))
  t.equal(reopened.source(gone.source_id), undefined, 'retired after the restart too')
  t.type(reopened.anySource(gone.source_id)?.retired_at, 'string')
  t.equal(reopened.slotsUsed('a1'), 1)
  t.equal(reopened.agent('a1')?.slots, 1)
  t.same(reopened.source(kept.source_id)?.manifest.severity_levels, ['low'])
  t.same(reopened.source(kept.source_id)?.listing, { public_receipts: true })
  t.equal(reopened.source(kept.source_id)?.updated_at, registry.source(kept.source_id)?.updated_at)
  t.equal(reopened.key(kept.source_id, key.key_id)?.record.revocation_reason, 'rotation')
  await t.rejects(reopened.addKey(gone.source_id, rawKey()), { code: 'source_retired' })
})

t.test('a registry file written before sources could change or retire, and before revocation reasons, still loads', async (t) => {
  const dir = await folder(t)
  const at = '2025-06-01T00:00:00.000Z'
  // As such a file held them: no updated_at, retired_at or revocation_reason.
  const old = {
    version: 1,
    tokens: [],
    agents: [{ agent_id: 'a1', creator_id: 'c1', slots: 1, created_at: at }],
    sources: [{ source_id: 'src_old', agent_id: 'a1', creator_id: 'c1', manifest: MANIFEST, listing: LISTING, created_at: at, flagged_for_review_at: null }],
    keys: [
      { key_id: 'key_old', source_id: 'src_old', state: 'revoked', public_key: Buffer.from(rawKey()).toString('base64url'), created_at: at, tested_at: at, promoted_at: at, grace_at: null, revoked_at: at },
    ],
  }
  await writeFile(join(dir, 'registry.json'), JSON.stringify(old))
  const bucket = await registryBucket(t)
  await migrateLegacyRegistry(dir, bucket)
  const registry = await openRegistry(t, bucket)
  t.match(registry.source('src_old'), { updated_at: null, retired_at: null }, 'a live source, never changed')
  t.equal(registry.slotsUsed('a1'), 1)
  t.equal(registry.key('src_old', 'key_old')?.record.revocation_reason, null)
  await registry.retireSource('src_old')
  const reopened = await openRegistry(t, bucket)
  t.equal(reopened.source('src_old'), undefined)
  t.equal(reopened.slotsUsed('a1'), 0)
})
