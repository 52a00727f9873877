import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { DISPUTE_LIMITS, Registry, REGISTRY_LIMITS } from '../../registry/index.js'
import { fingerprint } from '../../registry/retired-keys.js'
import { MANIFEST } from '../helpers/api.js'
import { fileRegistryBuckets, openRegistry, registryBucket, storedEntries, storedSource, type TapLike } from '../helpers/registry-bucket.js'

/**
 * The registry on a real bucket of the key-value port (the file adapter; see
 * registry-bucket.ts for another). A reopen is a new Registry on the same bucket: what a
 * restart, or another process, loads. `bucket.failNext` fails one write like a full disk.
 */

const rawKey = () => generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)

async function setup(t: TapLike) {
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store)
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const key = await registry.addKey(source.source_id, rawKey())
  return { store, registry, source, key }
}

t.test('a failed save rolls the change back: memory never claims what disk does not hold', async (t) => {
  const { store, registry, source, key } = await setup(t)
  store.failNext = true
  await t.rejects(registry.revokeKey(source.source_id, key.key_id), { code: 'io' })
  t.equal(registry.key(source.source_id, key.key_id)?.record.state, 'pending', 'memory rolled back')
  t.equal((await storedSource(store, source.source_id)).keys[0]?.state, 'pending', 'disk unchanged')
  store.failNext = true
  await t.rejects(registry.addKey(source.source_id, rawKey()))
  t.equal(registry.keysOf(source.source_id).length, 1, 'the key added by the failed change is gone')
})

t.test('keys of a source and sources of an agent: only their own, kept right through a rollback, a prune and a reopen', async (t) => {
  const { store, registry, source, key } = await setup(t)
  const agent = await registry.createAgent({ agent_id: 'a2', creator_id: 'c1', slots: 2 })
  const other = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const otherKey = await registry.addKey(other.source_id, rawKey())
  t.same(registry.keysOf(source.source_id).map((k) => k.key_id), [key.key_id])
  t.same(registry.keysOf(other.source_id).map((k) => k.key_id), [otherKey.key_id])
  t.same(registry.sourcesOfAgent('a2').map((s) => s.source_id), [other.source_id])
  t.same(registry.keysOf('src_nothing'), [])
  t.same(registry.sourcesOfAgent('nobody'), [])

  store.failNext = true
  await t.rejects(registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } }))
  t.equal(registry.sourcesOfAgent('a2').length, 1, 'the failed source takes no slot')
  await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  await t.rejects(registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } }), { code: 'no_open_slot' })

  // A revocation whose prune fails to record puts the dropped records back in the index too.
  const kept = REGISTRY_LIMITS.revokedKeysPerSource
  for (let i = 0; i < kept; i++) {
    const k = await registry.addKey(other.source_id, rawKey())
    await registry.revokeKey(other.source_id, k.key_id)
  }
  await registry.revokeKey(other.source_id, otherKey.key_id)
  const before = registry.keysOf(other.source_id).map((k) => k.key_id).sort()
  t.equal(before.length, kept)
  store.failNext = true
  await t.rejects(registry.addKey(other.source_id, rawKey()))
  t.same(registry.keysOf(other.source_id).map((k) => k.key_id).sort(), before, 'a rolled-back prune restores the listing')
  await registry.addKey(other.source_id, rawKey())
  const after = registry.keysOf(other.source_id)
  t.equal(after.length, kept, 'one revoked record dropped, one pending added')
  t.ok(after.every((k) => k.source_id === other.source_id))

  const reopened = await openRegistry(t, store)
  t.same(reopened.keysOf(other.source_id).map((k) => k.key_id).sort(), after.map((k) => k.key_id).sort())
  t.same(reopened.sourcesOfAgent('a2').map((s) => s.source_id).sort(), registry.sourcesOfAgent('a2').map((s) => s.source_id).sort())
  t.same(reopened.keysOf(source.source_id).map((k) => k.key_id), [key.key_id])
})

t.test('a key object held by a request in flight sees a later revocation', async (t) => {
  const { registry, source, key } = await setup(t)
  const held = registry.key(source.source_id, key.key_id)!
  await registry.revokeKey(source.source_id, key.key_id)
  t.equal(held.record.state, 'revoked')
})

t.test('state survives reopening the store', async (t) => {
  const { store, registry, source, key } = await setup(t)
  await registry.markTested(source.source_id, key.key_id)
  await registry.promoteKey(source.source_id, key.key_id)
  const reopened = await openRegistry(t, store)
  t.equal(reopened.key(source.source_id, key.key_id)?.record.state, 'active')
  t.equal(reopened.source(source.source_id)?.creator_id, 'c1')
})

t.test('the admin token authenticates as admin; other strings do not', async (t) => {
  const { registry } = await setup(t)
  t.match(registry.authenticate('admin-secret'), { role: 'admin', subject: 'admin' })
  t.equal(registry.authenticate('admin-secreT'), undefined)
  t.equal(registry.authenticate(''), undefined)
  const { token } = await registry.createToken('creator', 'c1')
  t.match(registry.authenticate(token), { role: 'creator', subject: 'c1' })
})

t.test('a revoked token authenticates no more, at once and after a reopen; revoking again changes nothing', async (t) => {
  const { store, registry } = await setup(t)
  const { token, record } = await registry.createToken('creator', 'c1')
  const other = await registry.createToken('creator', 'c1')
  const held = registry.authenticate(token)!
  t.equal(held.tokenId, record.token_id)
  t.ok(registry.stillAuthenticated(held))
  const revoked = await registry.revokeToken(record.token_id)
  t.notOk(registry.stillAuthenticated(held), 'a request authenticated before the revocation learns of it')
  t.ok(registry.stillAuthenticated(registry.authenticate('admin-secret')!), 'the admin token is not a record and stays valid')
  t.type(revoked.revoked_at, 'string')
  t.equal(registry.authenticate(token), undefined, 'refused from the next request on')
  t.match(registry.authenticate(other.token), { role: 'creator', subject: 'c1' }, 'the subject keeps its other tokens')
  const again = await registry.revokeToken(record.token_id)
  t.equal(again.revoked_at, revoked.revoked_at, 'a second revocation keeps the first time')
  await t.rejects(registry.revokeToken('tok_nothing'), { code: 'not_found' })
  const reopened = await openRegistry(t, store)
  t.equal(reopened.authenticate(token), undefined, 'still refused after a reopen')
  t.equal(reopened.token(record.token_id)?.revoked_at, revoked.revoked_at, 'and the record still tells when')
  t.same([...reopened.tokens()].map((r) => r.token_id), [record.token_id, other.record.token_id], 'listed oldest first')
})

t.test('a revocation that cannot be saved leaves the token working', async (t) => {
  const { store, registry } = await setup(t)
  const { token, record } = await registry.createToken('renter', 'r1')
  store.failNext = true
  await t.rejects(registry.revokeToken(record.token_id), { code: 'io' })
  t.match(registry.authenticate(token), { role: 'renter', subject: 'r1' })
  t.equal(registry.token(record.token_id)?.revoked_at, null)
  t.equal((await registry.revokeToken(record.token_id)).token_id, record.token_id, 'and a retry revokes it')
  t.equal(registry.authenticate(token), undefined)
})

t.test('a registry saved before tokens could be revoked loads with every token live', async (t) => {
  const { store, registry } = await setup(t)
  const { token } = await registry.createToken('creator', 'c1')
  // As the files of a release before revocations held them, copied into the bucket: no revoked_at.
  for (const [key, entry] of await storedEntries(store)) {
    if (!key.startsWith('token.')) continue
    delete entry.token.revoked_at
    await store.put(key, Buffer.from(JSON.stringify(entry)))
  }
  const reopened = await openRegistry(t, store)
  t.match(reopened.authenticate(token), { role: 'creator', subject: 'c1' })
  t.equal([...reopened.tokens()][0]?.revoked_at, null)
})

t.test('revoked token records are kept up to their bound, then the oldest is dropped, also on disk', async (t) => {
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store)
  const kept = REGISTRY_LIMITS.revokedTokens
  const first = await registry.createToken('renter', 'r0')
  await registry.revokeToken(first.record.token_id)
  // Many at once, so the bucket's group commit keeps twenty thousand writes short.
  const made = await Promise.all(Array.from({ length: kept - 1 }, (_, i) => registry.createToken('renter', `r${i + 1}`)))
  await Promise.all(made.map((m) => registry.revokeToken(m.record.token_id)))
  t.ok(registry.token(first.record.token_id), 'all kept up to the bound')
  const last = await registry.createToken('renter', 'last')
  await registry.revokeToken(last.record.token_id)
  t.equal(registry.token(first.record.token_id), undefined, 'the oldest revoked record made room')
  t.equal(registry.authenticate(first.token), undefined, 'and its token still authenticates nobody')
  t.equal([...registry.tokens()].length, kept)
  const reopened = await openRegistry(t, store)
  t.equal(reopened.token(first.record.token_id), undefined, 'dropped on disk too')
  t.equal([...reopened.tokens()].length, kept)
  t.equal(reopened.authenticate(last.token), undefined)
})

t.test('promote works only from pending: active and grace keys get invalid_key_state', async (t) => {
  const { registry, source, key } = await setup(t)
  await registry.markTested(source.source_id, key.key_id)
  await registry.promoteKey(source.source_id, key.key_id)
  await t.rejects(registry.promoteKey(source.source_id, key.key_id), { code: 'invalid_key_state' }, 'active')
  const next = await registry.addKey(source.source_id, rawKey())
  await registry.markTested(source.source_id, next.key_id)
  await registry.promoteKey(source.source_id, next.key_id)
  t.equal(registry.key(source.source_id, key.key_id)?.record.state, 'grace')
  await t.rejects(registry.promoteKey(source.source_id, key.key_id), { code: 'invalid_key_state' }, 'grace')
})

t.test('a source holds at most 32 keys that are not revoked; revoking one makes room', async (t) => {
  const { registry, source } = await setup(t)
  const added = []
  for (let i = 1; i < 32; i++) added.push(await registry.addKey(source.source_id, rawKey()))
  await t.rejects(registry.addKey(source.source_id, rawKey()), { code: 'limit_exceeded' })
  await registry.revokeKey(source.source_id, added[0]!.key_id)
  t.equal((await registry.addKey(source.source_id, rawKey())).state, 'pending', 'a revoked key does not count')
})

t.test('rotation never runs into a wall: past the kept revoked keys the oldest revoked record is dropped', async (t) => {
  const { registry, source } = await setup(t)
  const kept = REGISTRY_LIMITS.revokedKeysPerSource
  const first = await registry.addKey(source.source_id, rawKey())
  await registry.revokeKey(source.source_id, first.key_id)
  const firstPublicKey = Buffer.from(first.public_key, 'base64url')
  await t.rejects(registry.addKey(source.source_id, firstPublicKey), { code: 'key_exists' }, 'a revoked public key cannot come back while its record is kept')
  for (let i = 1; i < kept; i++) {
    const k = await registry.addKey(source.source_id, rawKey())
    await registry.revokeKey(source.source_id, k.key_id)
  }
  t.equal(registry.keysOf(source.source_id).filter((k) => k.state === 'revoked').length, kept)
  t.ok(registry.key(source.source_id, first.key_id), 'the first revoked key is still known')
  const next = await registry.addKey(source.source_id, rawKey())
  t.equal(next.state, 'pending', 'one rotation more still registers a key')
  t.equal(registry.key(source.source_id, first.key_id), undefined, 'the oldest revoked record made room')
  await t.rejects(registry.addKey(source.source_id, firstPublicKey), { code: 'key_exists', message: /revoked/ }, 'its public key is still refused: revocation is forward-only')
  t.equal(registry.keysOf(source.source_id).filter((k) => k.state === 'revoked').length, kept - 1)
  await registry.revokeKey(source.source_id, next.key_id)
  const live = []
  for (let i = 0; i < 31; i++) live.push(await registry.addKey(source.source_id, rawKey()))
  for (const k of live) await registry.revokeKey(source.source_id, k.key_id)
  t.equal(registry.keysOf(source.source_id).filter((k) => k.state === 'revoked').length, kept, 'revoking keeps the bound too')
})

t.test('a thousand concurrent requests to flag a source write the registry once', async (t) => {
  const { store, registry, source } = await setup(t)
  let saves = 0
  const writes = store.writes
  await Promise.all(Array.from({ length: 1000 }, () => registry.flagSource(source.source_id)))
  saves = store.writes - writes
  t.equal(saves, 1)
  t.type(registry.source(source.source_id)?.flagged_for_review_at, 'string')
})

t.test('a dropped revoked key stays refused after a restart, and a failed save forgets its fingerprint', async (t) => {
  const store = await registryBucket(t)
  // A clock that moves on each reading, so the oldest revoked record is one and the same
  // before and after the undone change (ties in revoked_at would go by listing order).
  let now = Date.parse('2026-01-01T00:00:00Z')
  const registry = await openRegistry(t, store, 'admin-secret', () => (now += 1000))
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const first = await registry.addKey(source.source_id, rawKey())
  await registry.revokeKey(source.source_id, first.key_id)
  const firstPublicKey = Buffer.from(first.public_key, 'base64url')
  for (let i = 1; i < REGISTRY_LIMITS.revokedKeysPerSource; i++) {
    const k = await registry.addKey(source.source_id, rawKey())
    await registry.revokeKey(source.source_id, k.key_id)
  }
  // The add that drops the first record fails to save: memory must not keep the drop either.
  store.failNext = true
  await t.rejects(registry.addKey(source.source_id, rawKey()), { code: 'io' })
  t.ok(registry.key(source.source_id, first.key_id), 'the record is back')
  t.same((await storedSource(store, source.source_id)).retired_keys, [], 'nothing was recorded')
  const made = await registry.addKey(source.source_id, rawKey())
  t.equal(registry.key(source.source_id, first.key_id), undefined, 'the next add drops it')
  t.equal((await storedSource(store, source.source_id)).retired_keys.length, 1, 'and records its fingerprint')
  const reopened = await openRegistry(t, store)
  await t.rejects(reopened.addKey(source.source_id, firstPublicKey), { code: 'key_exists' }, 'refused after a restart')
  t.equal((await reopened.addKey(source.source_id, rawKey())).state, 'pending', 'a fresh key is taken')
  t.equal(reopened.key(source.source_id, made.key_id)?.record.state, 'pending')
})

t.test('a source keeps the fingerprints of its newest dropped revoked keys, up to the bound, across restarts', async (t) => {
  const { store, registry, source } = await setup(t)
  // Fill the fingerprints to the bound through the bucket directly: revoking a thousand
  // keys one by one would take long. The entry holds the newest `bound` (keys[0] went).
  const bound = REGISTRY_LIMITS.retiredKeysPerSource
  const keys = Array.from({ length: bound + 1 }, () => rawKey())
  const other = rawKey()
  const { agent } = { agent: registry.agent('a1')! }
  await registry.setAgentSlots(agent.agent_id, 2)
  const second = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const entry = await storedSource(store, source.source_id)
  await store.put(`source.${source.source_id}`, Buffer.from(JSON.stringify({ ...entry, retired_keys: keys.slice(1).map((k) => fingerprint(k)) })))
  const otherEntry = await storedSource(store, second.source_id)
  await store.put(`source.${second.source_id}`, Buffer.from(JSON.stringify({ ...otherEntry, retired_keys: [fingerprint(other)] })))
  const reopened = await openRegistry(t, store)
  t.equal((await reopened.addKey(source.source_id, keys[0]!)).state, 'pending', 'the oldest past the bound went')
  await t.rejects(reopened.addKey(source.source_id, keys[1]!), { code: 'key_exists' }, 'the next oldest is kept')
  await t.rejects(reopened.addKey(source.source_id, keys[bound]!), { code: 'key_exists' }, 'the newest is kept')
  t.equal((await reopened.addKey(source.source_id, other)).state, 'pending', 'fingerprints are per source')
  await t.rejects(reopened.addKey(second.source_id, other), { code: 'key_exists' }, 'and kept for their own')
  t.equal((await storedSource(store, source.source_id)).retired_keys.length, bound, 'the entry holds the bound, no more')
})

t.test('a token is never created before the newest one, even when the clock steps back, also after a restart', async (t) => {
  const store = await registryBucket(t)
  let now = Date.parse('2026-01-01T00:00:05Z')
  const registry = await openRegistry(t, store, 'admin-secret', () => now)
  const a = await registry.createToken('creator', 'c1')
  now -= 1000
  const b = await registry.createToken('creator', 'c1')
  t.equal(b.record.created_at, a.record.created_at, 'held at the newest time')
  const reopened = await openRegistry(t, store, 'admin-secret', () => now)
  const c = await reopened.createToken('creator', 'c1')
  t.equal(c.record.created_at, a.record.created_at, 'after a restart too')
  now += 5000
  t.ok((await reopened.createToken('creator', 'c1')).record.created_at > a.record.created_at, 'and moves on with the clock')
})

const disputed = (...ids: string[]) => ids.map((signal_id, i) => ({ signal_id, received_at: '2026-01-01T00:00:00.000Z', seq: i + 1 }))

t.test('a dispute that cannot be saved is neither opened nor decided, and a saved one reads back after a reopen', async (t) => {
  const { store, registry, source, key } = await setup(t)
  await registry.revokeKey(source.source_id, key.key_id)
  const input = { source, keyId: key.key_id, signals: disputed('sig_00000001', 'sig_00000002'), evidence: 'leaked', openedBy: 'c1' }
  store.failNext = true
  await t.rejects(registry.openDispute(input), { code: 'io' })
  t.same(registry.disputesOf(source.source_id), [], 'the failed dispute is not held')
  const opened = await registry.openDispute(input)
  t.equal(opened.creator_id, 'c1')

  store.failNext = true
  await t.rejects(registry.resolveDispute(source.source_id, opened.dispute_id, 'accepted', 'ok'), { code: 'io' })
  t.equal(registry.dispute(source.source_id, opened.dispute_id)?.state, 'open', 'the failed decision is undone')
  t.equal(registry.disputeOf(source.source_id, 'sig_00000001'), undefined, 'and disputed no signal')
  t.equal((await storedEntries(store)).get(`disputes.${source.source_id}`)?.disputes[0]?.state, 'open', 'disk unchanged')

  await registry.resolveDispute(source.source_id, opened.dispute_id, 'accepted', 'ok')
  t.equal(registry.disputeOf(source.source_id, 'sig_00000002'), opened.dispute_id)
  t.equal(registry.disputeOf(source.source_id, 'sig_00000003'), undefined)
  const reopened = await openRegistry(t, store)
  t.equal(reopened.dispute(source.source_id, opened.dispute_id)?.state, 'accepted')
  t.equal(reopened.disputeOf(source.source_id, 'sig_00000001'), opened.dispute_id, 'the disputed state is rebuilt on load')
  t.equal(reopened.disputeOf('src_other', 'sig_00000001'), undefined, 'and only for its own source')
})

t.test('a decision is final: reversed or repeated with another note it is refused and changes nothing', async (t) => {
  const { registry, source, key } = await setup(t)
  await registry.revokeKey(source.source_id, key.key_id)
  const input = { source, keyId: key.key_id, signals: disputed('sig_00000001'), evidence: 'leaked', openedBy: 'c1' }
  const accepted = await registry.openDispute(input)
  await registry.resolveDispute(source.source_id, accepted.dispute_id, 'accepted', 'checked')
  await t.rejects(registry.resolveDispute(source.source_id, accepted.dispute_id, 'rejected', null), { code: 'invalid_dispute_state' })
  await t.rejects(registry.resolveDispute(source.source_id, accepted.dispute_id, 'accepted', 'another note'), { code: 'invalid_dispute_state' })
  t.equal((await registry.resolveDispute(source.source_id, accepted.dispute_id, 'accepted', null)).resolution, 'checked', 'repeating it without a note changes nothing')
  t.equal(registry.dispute(source.source_id, accepted.dispute_id)?.state, 'accepted')
  t.equal(registry.disputeOf(source.source_id, 'sig_00000001'), accepted.dispute_id, 'the signal stays disputed')

  const rejected = await registry.openDispute({ ...input, signals: disputed('sig_00000002') })
  await registry.resolveDispute(source.source_id, rejected.dispute_id, 'rejected', null)
  await t.rejects(registry.resolveDispute(source.source_id, rejected.dispute_id, 'accepted', null), { code: 'invalid_dispute_state' })
  t.equal(registry.disputeOf(source.source_id, 'sig_00000002'), undefined, 'a rejected dispute moves no signal')
})

t.test('disputes are bounded per source, per creator and in all, counting every state', async (t) => {
  const { registry, source, key } = await setup(t)
  await registry.revokeKey(source.source_id, key.key_id)
  const input = { source, keyId: key.key_id, signals: disputed('sig_00000001'), evidence: 'leaked', openedBy: 'c1' }
  const first = await registry.openDispute(input)
  await registry.resolveDispute(source.source_id, first.dispute_id, 'rejected', null)
  for (let i = 1; i < DISPUTE_LIMITS.perSource; i++) await registry.openDispute({ ...input, signals: disputed(`sig_${String(i).padStart(8, '0')}`) })
  await t.rejects(registry.openDispute({ ...input, signals: disputed('sig_99999999') }), { code: 'limit_exceeded', message: /source/ }, 'a decided dispute still counts')
  t.same(
    registry.disputesOf(source.source_id).map((d) => d.dispute_id).at(-1),
    first.dispute_id,
    'listed newest first',
  )
  // The same creator's other sources share its bound.
  const agent = await registry.createAgent({ agent_id: 'a2', creator_id: 'c1', slots: 10 })
  let refused: unknown
  for (let n = 0; refused === undefined && n < 10; n++) {
    const other = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
    const otherKey = await registry.addKey(other.source_id, rawKey())
    await registry.revokeKey(other.source_id, otherKey.key_id)
    for (let i = 0; i < DISPUTE_LIMITS.perSource; i++) {
      refused = await registry.openDispute({ ...input, source: other, keyId: otherKey.key_id, signals: disputed(`sig_${String(i).padStart(8, '0')}`) }).then(() => undefined, (err: unknown) => err)
      if (refused !== undefined) break
    }
  }
  t.match(refused, { code: 'limit_exceeded', message: /creator/ })
})

t.test('a signal is named by one open or accepted dispute at a time; once one is rejected it can be named again', async (t) => {
  const { registry, source, key } = await setup(t)
  await registry.revokeKey(source.source_id, key.key_id)
  const input = { source, keyId: key.key_id, evidence: 'leaked', openedBy: 'c1' }
  const first = await registry.openDispute({ ...input, signals: disputed('sig_00000001', 'sig_00000002') })
  await t.rejects(registry.openDispute({ ...input, signals: disputed('sig_00000003', 'sig_00000002') }), { code: 'already_exists', message: new RegExp(`sig_00000002 is already named by dispute ${first.dispute_id} \\(open\\)`) })
  await registry.resolveDispute(source.source_id, first.dispute_id, 'accepted', null)
  await t.rejects(registry.openDispute({ ...input, signals: disputed('sig_00000001') }), { code: 'already_exists', message: /\(accepted\)/ })
  const other = await registry.openDispute({ ...input, signals: disputed('sig_00000003') })
  await registry.resolveDispute(source.source_id, other.dispute_id, 'rejected', null)
  t.equal((await registry.openDispute({ ...input, signals: disputed('sig_00000003') })).state, 'open', 'named again after a rejection')
  t.equal(registry.disputesOf(source.source_id).length, 3, 'the refused ones took no place')
})

t.test('disputes survive closing the bucket and opening it again from its files', async (t) => {
  const open = await fileRegistryBuckets(t)
  const store = await registryBucket(t, open)
  const registry = await openRegistry(t, store)
  const agent = await registry.createAgent({ agent_id: 'a1', creator_id: 'c1', slots: 1 })
  const source = await registry.createSource({ agent, manifest: MANIFEST as any, listing: { public_receipts: false } })
  const key = await registry.addKey(source.source_id, rawKey())
  await registry.revokeKey(source.source_id, key.key_id)
  const opened = await registry.openDispute({ source, keyId: key.key_id, signals: disputed('sig_00000001'), evidence: 'leaked', openedBy: 'c1' })
  await registry.resolveDispute(source.source_id, opened.dispute_id, 'accepted', null)
  await registry.close()
  await store.close()
  const reopened = await openRegistry(t, await registryBucket(t, open))
  t.equal(reopened.dispute(source.source_id, opened.dispute_id)?.state, 'accepted')
  t.equal(reopened.disputeOf(source.source_id, 'sig_00000001'), opened.dispute_id)
})

t.test('the registry is bounded: live tokens, agents and sources in all, each refused past its bound with limit_exceeded', async (t) => {
  // Smaller bounds than REGISTRY_LIMITS's, the same checks: filling a bucket with three
  // hundred thousand entries would take minutes.
  const limits = { tokens: 40, agents: 12, sources: 30 }
  const registry = await Registry.open(await registryBucket(t), 'admin-secret', { limits })
  t.teardown(() => registry.close())
  for (let i = 0; i < limits.tokens; i++) await registry.createToken('creator', `c${i}`)
  await t.rejects(registry.createToken('renter', 'one-more'), { code: 'limit_exceeded' }, 'tokens')
  const agents = []
  for (let i = 0; i < limits.agents; i++) agents.push(await registry.createAgent({ agent_id: `a${i}`, creator_id: `c${i % 100}`, slots: 3 }))
  await t.rejects(registry.createAgent({ agent_id: 'one-more', creator_id: 'c0', slots: 1 }), { code: 'limit_exceeded' }, 'agents')
  const listing = { public_receipts: false }
  for (let i = 0; i < limits.sources; i++) await registry.createSource({ agent: agents[Math.floor(i / 3)]!, manifest: MANIFEST as any, listing })
  const withRoom = agents[agents.length - 1]!
  t.equal(registry.slotsUsed(withRoom.agent_id), 0, 'an agent with open slots')
  await t.rejects(registry.createSource({ agent: withRoom, manifest: MANIFEST as any, listing }), { code: 'limit_exceeded' }, 'sources')
})
