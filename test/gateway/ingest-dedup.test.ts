import t from 'tap'
import { payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

const gw = await startTestGateway(t)
const src = await provision(gw)

t.test('a retry with the same body, a fresh nonce and timestamp gets 202 with the original received_at', async (t) => {
  const p = payload(src.sourceId)
  const first = await push(gw, src.sign(p))
  t.equal(first.status, 202)
  await new Promise((r) => setTimeout(r, 20))
  const retry = await push(gw, src.sign(p))
  t.equal(retry.status, 202)
  t.equal(retry.body.received_at, first.body.received_at)
  t.equal(retry.body.deduplicated, true)
  t.equal(retry.body.signal_id, p.signal_id)
})

t.test('the same signal_id with a different body is refused with 409 idempotency_conflict', async (t) => {
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  const res = await push(gw, src.sign({ ...p, confidence: 1 }))
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'idempotency_conflict')
})

t.test('a retry whose bytes differ only in spacing is a different body: 409', async (t) => {
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  const { signPush } = await import('../../harness/signed-push.js')
  const spaced = signPush({ sourceId: src.sourceId, keyId: src.keyId, key: src.key, payload: p })
  const body = Buffer.from(JSON.stringify(p, null, 2))
  // Re-sign the re-spaced bytes so only the body hash differs.
  const { signingString } = await import('../../harness/signed-push.js')
  const { sign } = await import('node:crypto')
  const sig = sign(null, Buffer.from(signingString('POST', spaced.path, spaced.headers['x-svc-timestamp']!, spaced.headers['x-svc-nonce']!, body)), src.key.privateKey)
  const res = await push(gw, { ...spaced, body, headers: { ...spaced.headers, 'x-svc-signature': `ed25519=:${sig.toString('base64')}:` } })
  t.equal(res.status, 409)
})

t.test('an Idempotency-Key reused with a different signal is refused with 409 idempotency_conflict', async (t) => {
  const key = `idem_${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: key }))).status, 202)
  const res = await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: key }))
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'idempotency_conflict')
})

t.test('an Idempotency-Key retry with the identical body gets the deduplicated 202', async (t) => {
  const p = payload(src.sourceId)
  const first = await push(gw, src.sign(p, { idempotencyKey: p.signal_id as string }))
  const retry = await push(gw, src.sign(p, { idempotencyKey: p.signal_id as string }))
  t.equal(retry.status, 202)
  t.equal(retry.body.received_at, first.body.received_at)
})

t.test('a retry with an Idempotency-Key other than its signal_id and the identical body gets the deduplicated 202', async (t) => {
  const p = payload(src.sourceId)
  const key = `idem_retry_${Date.now()}`
  const first = await push(gw, src.sign(p, { idempotencyKey: key }))
  t.equal(first.status, 202)
  const retry = await push(gw, src.sign(p, { idempotencyKey: key }))
  t.equal(retry.status, 202)
  t.equal(retry.body.deduplicated, true)
  t.equal(retry.body.received_at, first.body.received_at)
})

t.test('an Idempotency-Key first used by a deduplicated retry is bound to that signal: another body under it is 409, the retry again 202', async (t) => {
  for (const originalKey of [undefined, `idem_first_${Date.now()}`]) {
    const p = payload(src.sourceId)
    const key = `idem_late_${Date.now()}_${originalKey === undefined ? 'a' : 'b'}`
    const first = await push(gw, src.sign(p, originalKey === undefined ? {} : { idempotencyKey: originalKey }))
    t.equal(first.status, 202)
    const retry = await push(gw, src.sign(p, { idempotencyKey: key }))
    t.equal(retry.status, 202, 'the retry under a new key is deduplicated')
    t.equal(retry.body.deduplicated, true)
    const other = await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: key }))
    t.equal(other.status, 409, 'another signal under the key the retry used')
    t.equal(other.body.error?.code, 'idempotency_conflict')
    const again = await push(gw, src.sign(p, { idempotencyKey: key }))
    t.equal(again.status, 202, 'the retry sent again')
    t.equal(again.body.received_at, first.body.received_at)
  }
})

t.test('a signal_id equal to an Idempotency-Key another signal used is refused with 409 idempotency_conflict', async (t) => {
  const key = `idem_as_id_${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: key }))).status, 202)
  const reuse = { ...payload(src.sourceId), signal_id: key }
  for (const headers of [{}, { idempotencyKey: key }]) {
    const res = await push(gw, src.sign(reuse, headers))
    t.equal(res.status, 409)
    t.equal(res.body.error.code, 'idempotency_conflict')
  }
})

t.test('a malformed Idempotency-Key is refused with 400 invalid_body', async (t) => {
  const res = await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: 'bad key!' }))
  t.equal(res.status, 400)
  t.equal(res.body.error.code, 'invalid_body')
})

t.test('a malformed Idempotency-Key is refused before dedup: also on a retry of an accepted signal, which it does not get bound to', async (t) => {
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  const res = await push(gw, src.sign(p, { idempotencyKey: 'bad key!' }))
  t.equal(res.status, 400)
  t.equal(res.body.error.code, 'invalid_body', res.body.error?.message)
  t.equal((await push(gw, src.sign(p))).status, 202, 'the signal is still there for a well-formed retry')
})

t.test('concurrent duplicates of one new signal produce one accept and deduplicated accepts, never two records', async (t) => {
  const p = payload(src.sourceId)
  const results = await Promise.all(Array.from({ length: 20 }, () => push(gw, src.sign(p))))
  t.ok(results.every((r) => r.status === 202), 'all 202')
  t.equal(results.filter((r) => r.body.deduplicated !== true).length, 1, 'exactly one first accept')
  t.equal(new Set(results.map((r) => r.body.received_at)).size, 1, 'one received_at')
})

t.test('the same signal_id in two different sources is two signals', async (t) => {
  const other = await provision(gw)
  const id = `shared_${Date.now()}`
  for (const [who, res] of [
    ['first source', await push(gw, src.sign(payload(src.sourceId, { signal_id: id })))],
    ['second source', await push(gw, other.sign(payload(other.sourceId, { signal_id: id })))],
  ] as const) {
    t.equal(res.status, 202, who)
    t.equal(res.body.deduplicated, undefined, `${who}: a new signal, not a retry`)
  }
})
