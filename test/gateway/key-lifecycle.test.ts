import t from 'tap'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

const gw = await startTestGateway(t)

const keyCall = (src: { sourceId: string; creatorToken: string }, keyId: string, action: 'promote' | 'revoke') =>
  call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${keyId}/${action}`, { token: src.creatorToken })

const register = async (src: { sourceId: string; creatorToken: string }, publicKey: string) =>
  call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken, body: { public_key: publicKey } })

t.test('a new key starts pending', async (t) => {
  const src = await provision(gw, { activate: false })
  const keys = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken })
  t.equal(keys.status, 200)
  t.equal(keys.body.data[0].state, 'pending')
  t.equal(keys.body.data[0].key_id, src.keyId)
})

t.test('every signal a pending key signs is a test signal, not only the first: recorded, answered with "test": true, never delivered', async (t) => {
  const src = await provision(gw, { activate: false })
  for (const which of ['first', 'second', 'third']) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    t.equal(res.status, 202, which)
    t.equal(res.body.test, true, `the ${which} signal is a test signal`)
  }
})

t.test('promoting a key before a test signal is refused with 409 key_not_tested', async (t) => {
  const src = await provision(gw, { activate: false })
  const res = await keyCall(src, src.keyId, 'promote')
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'key_not_tested')
})

t.test('a refused test signal does not count: the key stays untested', async (t) => {
  const src = await provision(gw, { activate: false })
  const res = await push(gw, src.sign(payload(src.sourceId, { severity: 'unknown-level' })))
  t.equal(res.status, 400)
  const promote = await keyCall(src, src.keyId, 'promote')
  t.equal(promote.status, 409)
  t.equal(promote.body.error.code, 'key_not_tested')
})

t.test('promoting an active key is refused with 409 invalid_key_state', async (t) => {
  const src = await provision(gw)
  const res = await keyCall(src, src.keyId, 'promote')
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'invalid_key_state')
})

t.test('a signal signed by a pending key is a test signal: 202 with test true', async (t) => {
  const src = await provision(gw, { activate: false })
  const res = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202)
  t.equal(res.body.test, true)
  const keys = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken })
  t.type(keys.body.data[0].tested_at, 'string', 'the key is marked tested')
})

t.test('a retry of a test signal is a deduplicated 202 that still says test true', async (t) => {
  const src = await provision(gw, { activate: false })
  const p = payload(src.sourceId)
  const first = await push(gw, src.sign(p))
  const retry = await push(gw, src.sign(p))
  t.equal(retry.status, 202)
  t.equal(retry.body.test, true)
  t.equal(retry.body.deduplicated, true)
  t.equal(retry.body.received_at, first.body.received_at)
})

t.test('a test signal resent once its key is active is a deduplicated 202 that still says test: it was recorded, never delivered', async (t) => {
  const src = await provision(gw, { activate: false })
  const p = payload(src.sourceId)
  const first = await push(gw, src.sign(p))
  t.equal(first.body.test, true)
  t.equal((await keyCall(src, src.keyId, 'promote')).status, 200)
  const resent = await push(gw, src.sign(p))
  t.equal(resent.status, 202)
  t.equal(resent.body.test, true, 'the answer is the original: a test')
  t.equal(resent.body.deduplicated, true)
  t.equal(resent.body.received_at, first.body.received_at)
  const fresh = await push(gw, src.sign({ ...p, signal_id: `${p.signal_id}-2` }))
  t.equal(fresh.status, 202, 'the same signal under a new id is accepted')
  t.equal(fresh.body.test, undefined)
  t.equal(fresh.body.deduplicated, undefined)
})

t.test('after a test signal the key is promoted to active and signs normal signals', async (t) => {
  const src = await provision(gw, { activate: false })
  await push(gw, src.sign(payload(src.sourceId)))
  const res = await keyCall(src, src.keyId, 'promote')
  t.equal(res.status, 200)
  t.equal(res.body.data.state, 'active')
  const signal = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(signal.status, 202)
  t.equal(signal.body.test, undefined)
})

t.test('rotation: promoting a new key moves the old one to grace, and both verify during the overlap', async (t) => {
  const src = await provision(gw)
  const next = generateCreatorKey()
  const reg = await register(src, next.publicKeyBase64)
  t.equal(reg.status, 201)
  t.equal(reg.body.data.state, 'pending')
  const newKeyId = reg.body.data.key_id
  t.equal((await push(gw, src.sign(payload(src.sourceId), { keyId: newKeyId, key: next }))).body.test, true)
  t.equal((await keyCall(src, newKeyId, 'promote')).body.data.state, 'active')
  const keys = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken })
  const old = keys.body.data.find((k: any) => k.key_id === src.keyId)
  t.equal(old.state, 'grace')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'grace key still verifies')
  t.equal((await push(gw, src.sign(payload(src.sourceId), { keyId: newKeyId, key: next }))).status, 202, 'new key verifies')
})

t.test('a revoked key gets 401 revoked_key at once, and revocation is forward-only', async (t) => {
  const src = await provision(gw)
  const before = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(before.status, 202)
  const revoked = await keyCall(src, src.keyId, 'revoke')
  t.equal(revoked.status, 200)
  t.equal(revoked.body.data.state, 'revoked')
  const after = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(after.status, 401)
  t.equal(after.body.error.code, 'revoked_key')
  // Refused at the edge, before any crypto: a signature that would not verify changes nothing.
  const forged = await push(gw, src.sign(payload(src.sourceId), { key: generateCreatorKey() }))
  t.equal(forged.body.error.code, 'revoked_key', 'a revoked key id is refused before its signature is checked')
  const promote = await keyCall(src, src.keyId, 'promote')
  t.equal(promote.status, 409, 'a revoked key cannot come back')
  t.equal(promote.body.error.code, 'invalid_key_state')
})

t.test('a grace key can be revoked after rotation; the active key keeps working', async (t) => {
  const src = await provision(gw)
  const next = generateCreatorKey()
  const newKeyId = (await register(src, next.publicKeyBase64)).body.data.key_id
  await push(gw, src.sign(payload(src.sourceId), { keyId: newKeyId, key: next }))
  await keyCall(src, newKeyId, 'promote')
  t.equal((await keyCall(src, src.keyId, 'revoke')).body.data.state, 'revoked')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).body.error.code, 'revoked_key')
  t.equal((await push(gw, src.sign(payload(src.sourceId), { keyId: newKeyId, key: next }))).status, 202)
})

t.test('a pending key can be revoked before it is ever promoted', async (t) => {
  const src = await provision(gw, { activate: false })
  t.equal((await keyCall(src, src.keyId, 'revoke')).body.data.state, 'revoked')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).body.error.code, 'revoked_key')
})

t.test('small-order and non-canonical public keys are refused at registration', async (t) => {
  const src = await provision(gw)
  const identity = Buffer.alloc(32)
  identity[0] = 1
  const nonCanonical = Buffer.alloc(32, 0xff)
  nonCanonical[31] = 0x7f
  for (const [name, key] of [['identity (small order)', identity], ['zero point', Buffer.alloc(32)], ['y ≥ p', nonCanonical]] as const) {
    const res = await register(src, key.toString('base64'))
    t.equal(res.status, 400, name)
    t.equal(res.body.error.code, 'invalid_public_key', name)
  }
  t.equal((await register(src, 'not base64 at all!')).body.error.code, 'invalid_public_key')
})

t.test('a key is accepted as base64, base64url or PEM SPKI', async (t) => {
  const src = await provision(gw)
  const { generateKeyPairSync } = await import('node:crypto')
  const a = generateCreatorKey()
  t.equal((await register(src, a.publicKeyBase64)).status, 201)
  const b = generateCreatorKey()
  t.equal((await register(src, Buffer.from(b.publicKeyBase64, 'base64').toString('base64url'))).status, 201)
  const pem = generateKeyPairSync('ed25519').publicKey.export({ format: 'pem', type: 'spki' }).toString()
  t.equal((await register(src, pem)).status, 201)
  t.equal((await register(src, a.publicKeyBase64)).body.error.code, 'key_exists', 'the same key twice is refused')
})

t.test('keys of a source are not visible or manageable by another creator', async (t) => {
  const a = await provision(gw)
  const b = await provision(gw)
  const res = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/keys`, { token: b.creatorToken })
  t.equal(res.status, 404)
  t.equal((await keyCall({ sourceId: a.sourceId, creatorToken: b.creatorToken }, a.keyId, 'revoke')).status, 404)
})
