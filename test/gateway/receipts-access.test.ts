import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { receiptOf, seedReceipts } from '../helpers/receipt-gateway.js'

// Receipts are put into the gateway's own chDB store with the real ClickHouseReceiptStore
// while it is stopped (seedReceipts); every access below is a real HTTP request.
let gw = await startTestGateway(t)
const owner = await provision(gw) // the private source P
const admin = (path: string, body?: unknown, method = 'POST') => call(gw.url, method, path, { token: gw.adminToken, body })

// A second source of the same creator, made public: Q.
const agentSecond = await call(gw.url, 'POST', '/v1/byo/sources', { token: owner.creatorToken, body: { agent_id: owner.agentId, manifest: (await call(gw.url, 'GET', `/v1/byo/sources/${owner.sourceId}`, { token: owner.creatorToken })).body.data.manifest } })
if (agentSecond.status !== 201) throw new Error(JSON.stringify(agentSecond.body))
const Q = agentSecond.body.data.source_id as string
const P = owner.sourceId
const stranger = await provision(gw)

// Q is public, with the shortest delay: an hour.
const madePublic = await call(gw.url, 'PATCH', `/v1/byo/sources/${Q}`, { token: owner.creatorToken, body: { listing: { public_receipts: true, public_delay_seconds: 3600 } } })
if (madePublic.status !== 200) throw new Error(JSON.stringify(madePublic.body))

async function token(role: string, subject: string): Promise<string> {
  const res = await admin('/v1/admin/tokens', { role, subject })
  if (res.status !== 201) throw new Error(JSON.stringify(res.body))
  return res.body.data.token
}
async function rent(renter: string, source: string, extra: Record<string, string> = {}): Promise<string> {
  const res = await admin('/v1/admin/rentals', { renter_id: renter, source_id: source, ...extra })
  if (res.status !== 201) throw new Error(JSON.stringify(res.body))
  return res.body.data.rental_id
}
const renters = {
  active: await token('renter', 'r-active'),
  ended: await token('renter', 'r-ended'),
  expired: await token('renter', 'r-expired'),
  scheduled: await token('renter', 'r-scheduled'),
  other: await token('renter', 'r-other'),
}
await rent('r-active', P)
await admin(`/v1/admin/rentals/${await rent('r-ended', P)}/end`)
const expiresAt = Date.now() + 3000
await rent('r-expired', P, { expires_at: new Date(expiresAt).toISOString() })
await rent('r-scheduled', P, { starts_at: new Date(Date.now() + 3_600_000).toISOString() })
await rent('r-other', stranger.sourceId)
const metrics = await token('metrics', 'scraper')

const HOUR = 3_600_000
const pOld = receiptOf(owner, 1, 2 * HOUR)
const pTest = receiptOf(owner, 2, 5 * 60_000, { test: true })
const qSource = { sourceId: Q, agentId: owner.agentId, keyId: owner.keyId }
const qOld = receiptOf(qSource, 3, 2 * HOUR)
const qFresh = receiptOf(qSource, 4, 10 * 60_000)
gw = await seedReceipts(t, gw, [pOld, pTest, qOld, qFresh], { env: { READ_RATE_ANON_PER_MIN: '100000' } })
const id = (r: { source_id: string; signal_id: string }) => receiptIdOf(r.source_id, r.signal_id)
// The expired rental's expires_at must be behind us.
await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAt - Date.now() + 200)))

const resources = {
  'P list': `/v1/byo/sources/${P}/receipts`,
  'P get': `/v1/byo/receipts/${id(pOld)}`,
  'P export': `/v1/byo/sources/${P}/receipts/export`,
  'Q list': `/v1/byo/sources/${Q}/receipts`,
  'Q get past delay': `/v1/byo/receipts/${id(qOld)}`,
  'Q get within delay': `/v1/byo/receipts/${id(qFresh)}`,
  'test receipt get': `/v1/byo/receipts/${id(pTest)}`,
  'Q export': `/v1/byo/sources/${Q}/receipts/export`,
  'cross list': '/v1/byo/receipts',
  'P stats': `/v1/byo/sources/${P}/stats`,
  'Q stats': `/v1/byo/sources/${Q}/stats`,
} as const
type Row = [string, string | undefined, number[]]
//              P list P get P exp Q list Q old Q new test Q exp cross P sta Q sta
const table: Row[] = [
  ['admin', gw.adminToken, [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200]],
  ['owner creator', owner.creatorToken, [200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 200]],
  ['other creator', stranger.creatorToken, [404, 404, 404, 200, 200, 404, 404, 404, 200, 404, 200]],
  ['renter, active rental of P', renters.active, [200, 200, 200, 200, 200, 404, 404, 404, 200, 200, 200]],
  ['renter, ended rental', renters.ended, [404, 404, 404, 200, 200, 404, 404, 404, 200, 404, 200]],
  ['renter, expired rental', renters.expired, [404, 404, 404, 200, 200, 404, 404, 404, 200, 404, 200]],
  ['renter, scheduled rental', renters.scheduled, [404, 404, 404, 200, 200, 404, 404, 404, 200, 404, 200]],
  ['renter of another source', renters.other, [404, 404, 404, 200, 200, 404, 404, 404, 200, 404, 200]],
  ['metrics token', metrics, [403, 403, 403, 403, 403, 403, 403, 403, 403, 403, 403]],
  ['anonymous', undefined, [404, 404, 401, 200, 200, 404, 404, 401, 400, 404, 200]],
  ['bad token', 'sgw_not_a_token_at_all_0000000000000000', [401, 401, 401, 401, 401, 401, 401, 401, 401, 401, 401]],
]

t.test('principal × resource × status', async (t) => {
  for (const [who, bearer, statuses] of table) {
    const got: number[] = []
    for (const path of Object.values(resources)) {
      const res = await fetch(gw.url + path, { headers: bearer === undefined ? {} : { authorization: `Bearer ${bearer}` } })
      await res.arrayBuffer()
      got.push(res.status)
    }
    t.same(got, statuses, who)
  }
})

const get = (path: string, bearer?: string) => call(gw.url, 'GET', path, bearer === undefined ? {} : { token: bearer })

t.test('a 404 for a caller without entitlement is the 404 of a thing that does not exist', async (t) => {
  const denied = await get(resources['P list'], renters.ended)
  const missing = await get('/v1/byo/sources/src_doesnotexist/receipts', renters.ended)
  t.equal(denied.status, 404)
  t.same([denied.body.error.code, denied.body.error.message], [missing.body.error.code, missing.body.error.message])
  const deniedGet = await get(resources['P get'])
  const missingGet = await get(`/v1/byo/receipts/${receiptIdOf(P, 'never')}`)
  t.same([deniedGet.body.error.code, deniedGet.body.error.message], [missingGet.body.error.code, missingGet.body.error.message])
})

t.test('the public gets redacted receipts older than the delay; renters and the owner get them whole', async (t) => {
  const pub = await get(resources['Q list'])
  t.same(pub.body.data.map((r: any) => r.receipt_id), [id(qOld)], 'nothing younger than public_delay_seconds')
  const shown = pub.body.data[0]
  for (const field of ['signal_id', 'key_id', 'note', 'recorded_at', 'test']) t.notOk(field in shown, `${field} is left out`)
  t.match(shown, { receipt_id: id(qOld), source_id: Q, agent_id: owner.agentId, token: qOld.token, severity: qOld.severity, confidence: qOld.confidence, emitted_at: qOld.emitted_at, received_at: qOld.received_at, outcome: 'pending', dispute_status: 'none' })
  t.same(Object.keys((await get(resources['Q get past delay'])).body.data).sort(), Object.keys(shown).sort(), 'one receipt is redacted alike')
  const full = await get(resources['Q list'], owner.creatorToken)
  t.same(full.body.data.map((r: any) => r.receipt_id), [id(qFresh), id(qOld)])
  t.equal(full.body.data[0].note, qFresh.note)
  const rented = await get(resources['P get'], renters.active)
  t.match(rented.body.data, { note: pOld.note, key_id: owner.keyId, signal_id: pOld.signal_id })
})

t.test('test receipts: the owner asks for them; a renter may not', async (t) => {
  // The recorder also keeps the onboarding's own test signal: every test receipt is listed, the seeded one among them.
  const withTest = (await get(`${resources['P list']}?include_test=true`, owner.creatorToken)).body.data
  t.same(withTest.filter((r: any) => !r.test).map((r: any) => r.receipt_id), [id(pOld)])
  t.ok(withTest.some((r: any) => r.receipt_id === id(pTest) && r.test === true), 'the seeded test receipt is listed for its owner')
  t.equal((await get(resources['P list'], owner.creatorToken)).body.data.length, 1)
  t.same((await get(resources['P list'], renters.active)).body.data.map((r: any) => r.receipt_id), [id(pOld)])
  const asked = await get(`${resources['P list']}?include_test=true`, renters.active)
  t.equal(asked.status, 400)
  t.match(asked.body.error.message, /include_test/)
})

t.test('across sources: a renter reads its active rentals\' sources, the public one source at a time', async (t) => {
  t.same((await get('/v1/byo/receipts', renters.active)).body.data.map((r: any) => r.receipt_id), [id(pOld)])
  t.same((await get('/v1/byo/receipts', renters.ended)).body.data, [])
  const none = await fetch(`${gw.url}/v1/byo/receipts/export?format=ndjson`, { headers: { authorization: `Bearer ${renters.ended}` } })
  t.same([none.status, await none.text()], [200, ''], 'an export across no sources is an empty file')
  const one = await fetch(`${gw.url}/v1/byo/receipts/export?format=ndjson`, { headers: { authorization: `Bearer ${renters.active}` } })
  t.same((await one.text()).trimEnd().split('\n').map((l) => JSON.parse(l).receipt_id), [id(pOld)], 'a renter exports its rented source, without test receipts')
  t.same((await get('/v1/byo/receipts', stranger.creatorToken)).body.data, [])
  const anon = await get('/v1/byo/receipts')
  t.equal(anon.status, 400)
  t.match(anon.body.error.message, /source_id/)
  t.same((await get(`/v1/byo/receipts?source_id=${Q}`)).body.data.map((r: any) => r.receipt_id), [id(qOld)])
  t.equal((await get(`/v1/byo/receipts?source_id=${P}`)).status, 404)
})

t.test('stats count what the reader may list: the public up to the delay, the owner everything, never a test receipt', async (t) => {
  const window = `?bucket=hour&from=${new Date(Date.now() - 3 * HOUR).toISOString()}`
  const pub = await get(resources['Q stats'] + window)
  t.equal(pub.status, 200)
  t.equal(pub.body.data.totals.total, 1, 'the receipt younger than public_delay_seconds is not counted')
  t.ok(Date.parse(pub.body.data.to) <= Date.now() - HOUR, 'the window ends before the cutoff')
  const own = await get(resources['Q stats'] + window, owner.creatorToken)
  t.equal(own.body.data.totals.total, 2)
  t.same(own.body.data.totals.severity, { [qOld.severity]: 1, [qFresh.severity]: 1 }, 'one of each severity')
  t.equal(own.body.data.buckets.length, 3 + 1, 'every hour of the window, the one under way included')
  const p = await get(resources['P stats'] + window, renters.active)
  t.same([p.body.data.totals.total, p.body.data.totals.outcome], [1, { pending: 1, hit: 0, miss: 0, void: 0 }], 'the test receipt is not counted')
  t.equal((await get(resources['P stats'], owner.creatorToken)).body.data.buckets.length, 60, 'by default the last hour by minute')
})

t.test('stats refuse a window they cannot answer with 400 invalid_request naming the problem', async (t) => {
  const cases: [string, RegExp][] = [
    ['?bucket=day', /bucket must be minute or hour/],
    [`?from=${new Date(Date.now() - 25 * HOUR).toISOString()}`, /at most 1440.*bucket=hour/],
    ['?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z', /to must be after from/],
    ['?from=yesterday', /from must be an ISO 8601/],
    ['?window=1h', /unknown query parameter "window"/],
  ]
  for (const [query, message] of cases) {
    const res = await get(resources['P stats'] + query, owner.creatorToken)
    t.same([res.status, res.body.error.code], [400, 'invalid_request'], query)
    t.match(res.body.error.message, message, query)
  }
})

t.test('a public cursor keeps its walk\'s cutoff, and one claiming a later cutoff is refused', async (t) => {
  const first = await get(`${resources['Q list']}?limit=1`)
  t.equal(first.body.next_cursor, null)
  const forged = `${(Date.now() + 86_400_000).toString(36)}.${'A'.repeat(20)}`
  const res = await get(`${resources['Q list']}?cursor=${forged}`)
  t.equal(res.status, 400)
  t.match(res.body.error.message, /cursor/)
})

t.test('a bad token, or a credential of another scheme, is 401 with a Bearer challenge, never the public view', async (t) => {
  const res = await fetch(gw.url + resources['Q list'], { headers: { authorization: 'Bearer nope' } })
  t.equal(res.status, 401)
  t.equal(res.headers.get('www-authenticate'), 'Bearer')
  const basic = await fetch(gw.url + resources['Q list'], { headers: { authorization: 'Basic dXNlcjpwYXNz' } })
  t.equal(basic.status, 401, 'another scheme is not the public')
})

t.test('the listing takes public_delay_seconds: a day by default, 1 hour to 30 days', async (t) => {
  const patch = (listing: unknown) => call(gw.url, 'PATCH', `/v1/byo/sources/${stranger.sourceId}`, { token: stranger.creatorToken, body: { listing } })
  t.same((await patch({ public_receipts: true })).body.data.listing, { public_receipts: true, public_delay_seconds: 86_400 })
  for (const bad of [3599, 2_592_001, 1.5, '3600']) {
    const res = await patch({ public_receipts: true, public_delay_seconds: bad })
    t.equal(res.status, 400, String(bad))
    t.match(res.body.error.message, /public_delay_seconds/)
  }
  t.same((await patch({ public_receipts: true, public_delay_seconds: 3600 })).body.data.listing, { public_receipts: true, public_delay_seconds: 3600 })
})


t.test('signal_id finds one signal\'s receipt for its creator and an active renter; the public view refuses it, signal ids being hidden there', async (t) => {
  const one = (r: { signal_id: string }) => `signal_id=${r.signal_id}`
  t.same((await get(`${resources['P list']}?${one(pOld)}`, owner.creatorToken)).body.data.map((r: any) => r.receipt_id), [id(pOld)], 'the creator, by source')
  t.same((await get(`/v1/byo/receipts?${one(pOld)}`, owner.creatorToken)).body.data.map((r: any) => r.receipt_id), [id(pOld)], 'the creator, across its sources')
  t.same((await get(`${resources['P list']}?${one(pOld)}`, renters.active)).body.data.map((r: any) => r.receipt_id), [id(pOld)], 'an active renter')
  t.same((await get(`/v1/byo/receipts?${one(pOld)}`, renters.active)).body.data.map((r: any) => r.receipt_id), [id(pOld)], 'an active renter, across its rented sources')
  t.same((await get(`${resources['P list']}?${one(qOld)}`, owner.creatorToken)).body.data, [], "another source's signal id finds nothing here")
  t.same((await get(`/v1/byo/receipts?${one(qOld)}`, renters.active)).body.data, [], 'nor a signal of a source the renter does not rent')
  t.same((await get(`${resources['Q list']}?${one(qOld)}`, owner.creatorToken)).body.data.map((r: any) => r.receipt_id), [id(qOld)], 'a public source in full for its creator')
  for (const path of [`${resources['Q list']}?${one(qOld)}`, `/v1/byo/receipts?source_id=${Q}&${one(qOld)}`]) {
    const res = await get(path)
    t.equal(res.status, 400, `the public: ${path}`)
    t.equal(res.body.error.code, 'invalid_request')
    t.match(res.body.error.message, /public view hides signal ids/)
  }
  const bad = await get(`${resources['P list']}?signal_id=short`, owner.creatorToken)
  t.equal(bad.status, 400, 'a value that is no signal id')
})
