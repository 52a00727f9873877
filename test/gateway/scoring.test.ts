import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, payload, provision, push, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { receiptOf, restartWithReceipts } from '../helpers/seeded-receipts.js'

// Receipts are seeded straight into the gateway's own store (what the recorder writes);
// status figures are read on every request (STATUS_CACHE_MS=0) so each post shows at once.
const first = await startTestGateway(t, { env: { STATUS_CACHE_MS: '0' } })
const src = await provision(first)
const signals = Array.from({ length: 6 }, () => payload(src.sourceId))
const answers: Array<{ received_at: string }> = []
for (const s of signals) {
  const res = await push(first, src.sign(s))
  if (res.status !== 202) throw new Error(`push: ${res.status}`)
  answers.push(res.body)
}
const testSignal = payload(src.sourceId)
const seeded = [...signals.map((s, i) => receiptOf(src, s, answers[i]!)), receiptOf(src, testSignal, answers[0]!, true)]
const gw = await restartWithReceipts(t, first, seeded)
const ids = signals.map((s) => receiptIdOf(src.sourceId, s.signal_id as string))
const testReceiptId = receiptIdOf(src.sourceId, testSignal.signal_id as string)

async function issue(role: string, subject: string): Promise<{ token: string; token_id: string }> {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role, subject } })
  if (res.status !== 201) throw new Error(`issuing a ${role} token: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}
const scorer = await issue('scorer', 'scoring-service')

const post = (body: unknown, token = scorer.token) => call(gw.url, 'POST', '/v1/scoring/outcomes', { token, body })
const item = (receiptId: string, outcome: string, scoredAt: string, over: Record<string, unknown> = {}) => ({
  receipt_id: receiptId,
  window_start: '2030-01-01T00:00:00.000Z',
  window_end: '2030-01-01T01:00:00.000Z',
  baseline: 0.5,
  outcome,
  scored_at: scoredAt,
  ...over,
})
async function outcomes(s: Provisioned = src): Promise<Record<string, number>> {
  const res = await call(gw.url, 'GET', `/v1/byo/sources/${s.sourceId}/status`)
  if (res.status !== 200) throw new Error(`status: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.outcomes
}
const minutesAgo = (m: number) => new Date(Date.now() - m * 60_000).toISOString()

t.test('a batch is stored: each outcome counts, unscored receipts stay pending, the test receipt is in no count', async (t) => {
  t.same(await outcomes(), { pending: 6, hit: 0, miss: 0, void: 0, total: 6 }, 'six receipts, none scored, the test one left out')
  const res = await post([item(ids[0]!, 'hit', minutesAgo(30)), item(ids[1]!, 'miss', minutesAgo(30)), item(ids[2]!, 'void', minutesAgo(30))])
  t.equal(res.status, 200)
  t.same(res.body, { ok: true, data: { accepted: 3, refused: [] } })
  t.same(await outcomes(), { pending: 3, hit: 1, miss: 1, void: 1, total: 6 })
})

t.test('posting the same batch again is harmless: the same answer, the same figures', async (t) => {
  const batch = [item(ids[3]!, 'hit', minutesAgo(20))]
  t.same((await post(batch)).body.data, { accepted: 1, refused: [] })
  const after = await outcomes()
  t.same((await post(batch)).body.data, { accepted: 1, refused: [] })
  t.same((await post(batch)).body.data, { accepted: 1, refused: [] })
  t.same(await outcomes(), after)
  t.same(after, { pending: 2, hit: 2, miss: 1, void: 1, total: 6 })
})

t.test('a newer scored_at corrects an older verdict; an older one arriving later changes nothing', async (t) => {
  t.same((await post([item(ids[4]!, 'miss', minutesAgo(10))])).body.data, { accepted: 1, refused: [] })
  t.same(await outcomes(), { pending: 1, hit: 2, miss: 2, void: 1, total: 6 })
  // The correction: newer.
  t.same((await post([item(ids[4]!, 'hit', minutesAgo(5))])).body.data, { accepted: 1, refused: [] })
  t.same(await outcomes(), { pending: 1, hit: 3, miss: 1, void: 1, total: 6 }, 'the newer verdict won')
  // A late, older verdict: stored, and loses.
  t.same((await post([item(ids[4]!, 'void', minutesAgo(60))])).body.data, { accepted: 1, refused: [] })
  t.same(await outcomes(), { pending: 1, hit: 3, miss: 1, void: 1, total: 6 }, 'the older verdict changed nothing')
})

t.test('each refused item is named by index, receipt_id, code and message; the rest of the batch is stored', async (t) => {
  const unknown = receiptIdOf(src.sourceId, 'never-sent')
  const ok = item(ids[5]!, 'void', minutesAgo(1))
  const batch = [
    item(unknown, 'hit', minutesAgo(1)), // 0: no such receipt
    item(testReceiptId, 'hit', minutesAgo(1)), // 1: a test receipt is never scored
    item(ids[0]!, 'hit', minutesAgo(1), { window_start: '2030-01-01T02:00:00Z' }), // 2: window ends before it starts
    item(ids[0]!, 'pending', minutesAgo(1)), // 3: not a verdict
    item(ids[0]!, 'hit', '2030-01-01 00:00:00.000Z'), // 4: not ISO 8601 UTC
    item(ids[0]!, 'hit', '2030-01-01T00:00:00+02:00'), // 5: not UTC
    item(ids[0]!, 'hit', new Date(Date.now() + 3_600_000).toISOString()), // 6: an hour in the future
    item(ids[0]!, 'hit', minutesAgo(1), { extra: 1 }), // 7: closed schema
    { receipt_id: ids[0], outcome: 'hit' }, // 8: fields missing
    42, // 9: not an object
    item('rc_not-an-id', 'hit', minutesAgo(1)), // 10: not a receipt id
    ok, // 11: stored
    { ...ok, outcome: 'hit' }, // 12: the same receipt twice in one post
  ]
  const res = await post(batch)
  t.equal(res.status, 200)
  t.equal(res.body.data.accepted, 1)
  const refused = res.body.data.refused as Array<{ index: number; receipt_id: string | null; code: string; message: string }>
  t.same(
    refused.map((r) => [r.index, r.receipt_id, r.code]),
    [
      [0, unknown, 'unknown_receipt'],
      [1, testReceiptId, 'unknown_receipt'],
      [2, ids[0], 'invalid_item'],
      [3, ids[0], 'invalid_item'],
      [4, ids[0], 'invalid_item'],
      [5, ids[0], 'invalid_item'],
      [6, ids[0], 'invalid_item'],
      [7, ids[0], 'invalid_item'],
      [8, ids[0], 'invalid_item'],
      [9, null, 'invalid_item'],
      [10, 'rc_not-an-id', 'invalid_item'],
      [12, ids[5], 'duplicate_item'],
    ],
  )
  const message = (i: number) => refused.find((r) => r.index === i)?.message
  t.equal(message(0), 'no such receipt')
  t.equal(message(1), message(0), 'a test receipt is refused exactly like a missing one')
  t.match(message(2), /window_end is before .*window_start/)
  t.match(message(3), /outcome must be one of "hit", "miss", "void"/)
  t.match(message(4), /scored_at must be an ISO 8601 UTC time/)
  t.match(message(6), /more than 300 seconds in the future/)
  t.match(message(7), /unknown field extra/)
  t.match(message(8), /window_start is required/)
  t.match(message(10), /not a receipt id/)
  t.match(message(12), /earlier in this post, at index 11/)
  t.same(await outcomes(), { pending: 0, hit: 3, miss: 1, void: 2, total: 6 }, 'only item 11 changed anything; receipt 0 kept its hit')
})

t.test('a post holds 1 to 1,000 items: 1,001, none, or not an array is refused whole (400); 1,000 items (over 64 kB) are taken', async (t) => {
  const unknownItems = (n: number) => Array.from({ length: n }, (_, i) => item(receiptIdOf(src.sourceId, `unknown-${i}`), 'hit', minutesAgo(1)))
  for (const [body, why] of [[unknownItems(1001), /1 to 1000 outcome items \(it holds 1001\)/], [[], /it holds 0/], [{ items: [] }, /JSON array/]] as const) {
    const res = await post(body)
    t.equal(res.status, 400)
    t.equal(res.body.error.code, 'invalid_request')
    t.match(res.body.error.message, why)
  }
  const thousand = unknownItems(1000)
  thousand[999] = item(ids[1]!, 'miss', minutesAgo(1))
  t.ok(JSON.stringify(thousand).length > 64 * 1024, 'the body is larger than the control plane takes elsewhere')
  const res = await post(thousand)
  t.equal(res.status, 200)
  t.equal(res.body.data.accepted, 1)
  t.equal(res.body.data.refused.length, 999)
  t.ok(res.body.data.refused.every((r: { code: string }, i: number) => r.code === 'unknown_receipt' && (r as unknown as { index: number }).index === i))
  // Past a megabyte: 413 before the body is read.
  const huge = await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer.token, rawBody: Buffer.from(`[${' '.repeat(1024 * 1024)}]`), headers: { 'content-type': 'application/json' } })
  t.equal(huge.status, 413)
  t.equal(huge.body.error.code, 'payload_too_large')
})

t.test('only a scorer token or the admin token posts: creator, renter and metrics tokens get 403, no token or a revoked one 401', async (t) => {
  const batch = [item(ids[2]!, 'void', minutesAgo(1))]
  for (const token of [src.creatorToken, (await issue('renter', 'r')).token, (await issue('metrics', 'm')).token]) {
    const res = await post(batch, token)
    t.equal(res.status, 403)
    t.equal(res.body.error.code, 'forbidden')
    t.match(res.body.error.message, /scorer token/)
  }
  t.equal((await call(gw.url, 'POST', '/v1/scoring/outcomes', { body: batch })).status, 401)
  t.equal((await post(batch, gw.adminToken)).status, 200, 'the admin token')
  const revoked = await issue('scorer', 'old-scorer')
  t.equal((await post(batch, revoked.token)).status, 200)
  t.equal((await call(gw.url, 'POST', `/v1/admin/tokens/${revoked.token_id}/revoke`, { token: gw.adminToken })).status, 200)
  t.equal((await post(batch, revoked.token)).status, 401, 'revoked: refused from the next request')
})

t.test('the token list filters on role=scorer, and names scorer among the roles when refusing', async (t) => {
  const listed = await call(gw.url, 'GET', '/v1/admin/tokens?role=scorer&subject=scoring-service', { token: gw.adminToken })
  t.equal(listed.status, 200)
  t.same(listed.body.data.map((r: { token_id: string; role: string }) => [r.token_id, r.role]), [[scorer.token_id, 'scorer']])
  const bad = await call(gw.url, 'GET', '/v1/admin/tokens?role=grader', { token: gw.adminToken })
  t.equal(bad.status, 400)
  t.match(bad.body.error.message, /metrics or scorer/)
})

t.test('a scorer token calls nothing but the scoring endpoint: every other bearer route in the OpenAPI document answers it 403', async (t) => {
  const other = await provision(gw)
  const doc = (await call(gw.url, 'GET', '/v1/openapi.json')).body
  let probed = 0
  for (const [path, ops] of Object.entries<Record<string, { security?: unknown }>>(doc.paths)) {
    if (path === '/v1/scoring/outcomes') continue
    for (const [method, op] of Object.entries(ops)) {
      if (op.security === undefined) continue
      // Real ids of a real source: a refusal must come from the role, not from a missing thing.
      const url = gw.url + path.replace('{source_id}', other.sourceId).replace('{agent_id}', other.agentId).replace('{key_id}', other.keyId).replace(/\{[a-z_]+\}/g, 'x')
      const res = await fetch(url, { method: method.toUpperCase(), headers: { authorization: `Bearer ${scorer.token}`, 'content-type': 'application/json' }, ...(method === 'post' || method === 'patch' ? { body: '{}' } : {}) })
      const text = await res.text()
      t.equal(res.status, 403, `${method.toUpperCase()} ${path}`)
      if (path !== '/metrics') t.equal((JSON.parse(text) as { error?: { code: string } }).error?.code, 'forbidden', `${method.toUpperCase()} ${path}: forbidden`)
      probed++
    }
  }
  t.ok(probed >= 20, `${probed} bearer routes probed`)
  const tokens = await call(gw.url, 'GET', '/v1/admin/tokens?subject=scoring-service', { token: gw.adminToken })
  t.equal(tokens.body.data.length, 1, 'its POST to /v1/admin/tokens made no token')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${other.sourceId}`, { token: other.creatorToken })).status, 200, 'the source is there for its creator')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${other.sourceId}/status`, { token: scorer.token })).status, 200, 'public reads stay public to it')
})
