import t from 'tap'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { receiptIdOf } from '../../receipts/index.js'
import { call, MANIFEST, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { receiptOf, restartWithReceipts } from '../helpers/seeded-receipts.js'

const HOUR = 3_600_000
const first = await startTestGateway(t, { env: { STATUS_CACHE_MS: '0' } })

// A source with signals in three distinct past hours and one in the hour under way.
const src = await provision(first)
const sent = Array.from({ length: 4 }, () => payload(src.sourceId))
const answers: Array<{ received_at: string; signal_id: string }> = []
for (const s of sent) answers.push((await push(first, src.sign(s))).body)
const hourStart = Math.floor(Date.now() / HOUR) * HOUR
// received_at as the recorder would have had it, had these arrived hours ago (the store takes what it is given).
const at = (hoursBack: number, minute: number) => ({ received_at: new Date(hourStart - hoursBack * HOUR + minute * 60_000).toISOString() })
const seeded = [
  receiptOf(src, sent[0]!, at(3, 10)),
  receiptOf(src, sent[1]!, at(3, 50)),
  receiptOf(src, sent[2]!, at(1, 5)),
  receiptOf(src, sent[3]!, answers[3]!),
  // A test receipt, newer than all: in no figure.
  receiptOf(src, payload(src.sourceId), { received_at: new Date(Date.now() + 1000).toISOString() }, true),
]

// A source whose key leaked: revoked as compromised, a dispute opened on its signal and accepted.
const leaky = await provision(first)
const leakedSignal = (await push(first, leaky.sign(payload(leaky.sourceId)))).body as { signal_id: string; received_at: string }
const next = generateCreatorKey()
const nextKeyId = (await call(first.url, 'POST', `/v1/byo/sources/${leaky.sourceId}/keys`, { token: leaky.creatorToken, body: { public_key: next.publicKeyBase64 } })).body.data.key_id as string
await push(first, leaky.sign(payload(leaky.sourceId), { key: next, keyId: nextKeyId }))
await call(first.url, 'POST', `/v1/byo/sources/${leaky.sourceId}/keys/${nextKeyId}/promote`, { token: leaky.creatorToken })
const revoked = await call(first.url, 'POST', `/v1/byo/sources/${leaky.sourceId}/keys/${leaky.keyId}/revoke`, { token: leaky.creatorToken, body: { reason: 'compromise' } })
const dispute = await call(first.url, 'POST', `/v1/byo/sources/${leaky.sourceId}/disputes`, {
  token: leaky.creatorToken,
  body: { key_id: leaky.keyId, signals: [{ signal_id: leakedSignal.signal_id, received_at: leakedSignal.received_at }], evidence: 'the private key was in a public CI log' },
})
const disputeId = dispute.body.data.dispute_id as string
const accepted = await call(first.url, 'POST', `/v1/byo/sources/${leaky.sourceId}/disputes/${disputeId}/accept`, { token: first.adminToken, body: { resolution: 'internal review note' } })

// A retired source, and one that is live but has no receipt at all.
const retired = await provision(first)
await call(first.url, 'POST', `/v1/byo/sources/${retired.sourceId}/retire`, { token: retired.creatorToken })
const quiet = await provision(first)

const gw = await restartWithReceipts(t, first, seeded)
const status = (sourceId: string, token?: string) => call(gw.url, 'GET', `/v1/byo/sources/${sourceId}/status`, token === undefined ? {} : { token })

t.test('the setup took: key revoked as compromised, dispute opened and accepted, source retired', async (t) => {
  t.equal(revoked.status, 200)
  t.equal(dispute.status, 201)
  t.equal(accepted.status, 200)
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${retired.sourceId}`, { token: retired.creatorToken })).body.data.retired_at === null, false)
})

t.test('a live source is public metadata: no token needed, and every field is there', async (t) => {
  const res = await status(src.sourceId)
  t.equal(res.status, 200)
  const data = res.body.data
  t.same(Object.keys(data).sort(), ['agent_id', 'created_at', 'flagged_for_review', 'flagged_for_review_at', 'incidents', 'incidents_total', 'keys', 'last_signal_at', 'listing', 'manifest', 'outcomes', 'retired_at', 'source_id', 'state', 'uptime'])
  t.equal(data.source_id, src.sourceId)
  t.equal(data.agent_id, src.agentId)
  t.equal(data.state, 'live')
  t.same(data.manifest, { archetype: MANIFEST.archetype, schema_version: '1.0', severity_levels: MANIFEST.severity_levels, max_rate: MANIFEST.max_rate, chains: MANIFEST.coverage.chains })
  t.same(data.listing, { public_receipts: false })
  t.equal(data.flagged_for_review, false)
  t.same(data.incidents, [])
  t.equal(data.incidents_total, 0)
  t.same(data.outcomes, { pending: 4, hit: 0, miss: 0, void: 0, total: 4 }, 'the test receipt counts nowhere')
  t.equal(data.last_signal_at, answers[3]!.received_at, 'the newest non-test received_at')
  t.same(data.keys.map((k: { key_id: string; state: string }) => [k.key_id, k.state]), [[src.keyId, 'active']])
  t.same(Object.keys(data.keys[0]).sort(), ['created_at', 'grace_at', 'key_id', 'promoted_at', 'revocation_reason', 'revoked_at', 'state'])
  const text = JSON.stringify(res.body)
  t.notOk(text.includes(src.key.publicKeyBase64), 'no public key material')
  t.notOk(text.includes('public_key'), 'no public key field')
  t.notOk(text.includes(MANIFEST.contact) || text.includes('wallet_set_size'), 'neither the contact nor the wallet set size')
  t.notOk(text.includes(src.creatorId), 'not the creator')
})

t.test('uptime: whole UTC hours since the hour of creation, the hour under way left out; hours with at least one accepted signal', async (t) => {
  const data = (await status(src.sourceId)).body.data
  // The source was created this hour (or, at an hour's turn, the last): 0 or 1 whole hours have passed.
  const created = Math.floor(Date.parse(data.created_at) / HOUR) * HOUR
  const now = Math.floor(Date.now() / HOUR) * HOUR
  t.equal(data.uptime.to, new Date(now).toISOString())
  t.equal(data.uptime.from, new Date(created).toISOString())
  t.equal(data.uptime.hours, (now - created) / HOUR)
  // Receipts at hours -3 (two), -1 and now: only those within [from, to) count.
  const expected = [hourStart - 3 * HOUR, hourStart - HOUR].filter((h) => h >= created && h < now).length
  t.equal(data.uptime.hours_with_signals, expected)
  t.equal(data.uptime.ratio, data.uptime.hours === 0 ? null : Math.min(1, expected / data.uptime.hours))
})

t.test('incidents: a key revoked as compromised, a dispute opened and accepted, newest first, with no evidence or review note', async (t) => {
  const res = await status(leaky.sourceId)
  t.equal(res.status, 200)
  const { incidents, incidents_total, keys } = res.body.data
  t.equal(incidents_total, 3)
  t.same(
    incidents.map((i: { type: string }) => i.type),
    ['dispute_accepted', 'dispute_opened', 'key_compromised'],
  )
  t.same(incidents[0], { type: 'dispute_accepted', at: accepted.body.data.resolved_at, dispute_id: disputeId, key_id: leaky.keyId, signals: 1 })
  t.same(incidents[1], { type: 'dispute_opened', at: dispute.body.data.created_at, dispute_id: disputeId, key_id: leaky.keyId, signals: 1 })
  t.same(incidents[2], { type: 'key_compromised', at: revoked.body.data.revoked_at, key_id: leaky.keyId })
  t.same(
    keys.map((k: { key_id: string; state: string; revocation_reason: string | null }) => [k.key_id, k.state, k.revocation_reason]),
    [
      [leaky.keyId, 'revoked', 'compromise'],
      [nextKeyId, 'active', null],
    ],
  )
  const text = JSON.stringify(res.body)
  t.notOk(text.includes('CI log') || text.includes('internal review note'), 'neither the evidence nor the resolution')
  t.notOk(text.includes(next.publicKeyBase64), 'no key material')
})

t.test('a live source with no receipt: zero counts, no last signal', async (t) => {
  const data = (await status(quiet.sourceId)).body.data
  t.same(data.outcomes, { pending: 0, hit: 0, miss: 0, void: 0, total: 0 })
  t.equal(data.last_signal_at, null)
  t.equal(data.uptime.hours_with_signals, 0)
})

t.test('no existence leak: a retired source answers the public, other creators and other roles with the 404 of an unknown one; its creator and the admin see it retired', async (t) => {
  const unknown = await status('src_never_was')
  t.equal(unknown.status, 404)
  t.equal(unknown.body.error.code, 'not_found')
  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'r' } })).body.data.token as string
  for (const token of [undefined, src.creatorToken, renter]) {
    const res = await status(retired.sourceId, token)
    t.equal(res.status, 404)
    t.same({ code: res.body.error.code, message: res.body.error.message }, { code: unknown.body.error.code, message: unknown.body.error.message })
  }
  for (const token of [retired.creatorToken, gw.adminToken]) {
    const res = await status(retired.sourceId, token)
    t.equal(res.status, 200)
    t.equal(res.body.data.state, 'retired')
    t.type(res.body.data.retired_at, 'string')
  }
})

t.test('any valid token reads a live source as the public does; an Authorization header naming no valid token is 401', async (t) => {
  const anonymous = (await status(src.sourceId)).body.data
  for (const token of [src.creatorToken, quiet.creatorToken, gw.adminToken]) {
    const res = await status(src.sourceId, token)
    t.equal(res.status, 200)
    t.same(res.body.data, anonymous)
  }
  for (const authorization of ['Bearer sgw_not_a_token', 'Basic abc', '']) {
    const res = await fetch(`${gw.url}/v1/byo/sources/${src.sourceId}/status`, { headers: { authorization } })
    t.equal(res.status, 401, `Authorization: ${JSON.stringify(authorization)}`)
    t.equal(((await res.json()) as { error: { code: string } }).error.code, 'unauthorized')
  }
  const head = await fetch(`${gw.url}/v1/byo/sources/${src.sourceId}/status`, { method: 'HEAD' })
  t.equal(head.status, 200)
  t.equal(await head.text(), '')
  t.equal((await fetch(`${gw.url}/v1/byo/sources/${src.sourceId}/status`, { method: 'POST' })).status, 405)
})

t.test('scores show in the counts', async (t) => {
  const scorer = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'scorer', subject: 'status-scorer' } })).body.data.token as string
  const scoredAt = new Date(Date.now() - 60_000).toISOString()
  const item = (signal: Record<string, unknown>, outcome: string) => ({ receipt_id: receiptIdOf(src.sourceId, signal.signal_id as string), window_start: scoredAt, window_end: scoredAt, baseline: 1, outcome, scored_at: scoredAt })
  const res = await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer, body: [item(sent[0]!, 'hit'), item(sent[1]!, 'hit'), item(sent[2]!, 'miss')] })
  t.same(res.body.data, { accepted: 3, refused: [] })
  t.same((await status(src.sourceId)).body.data.outcomes, { pending: 1, hit: 2, miss: 1, void: 0, total: 4 })
})
