import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { receiptOf, seedReceipts } from '../helpers/receipt-gateway.js'

// The gateway's own store, seeded through the real ClickHouseReceiptStore on its chDB
// folder while it is stopped (see seedReceipts); every read below goes over HTTP.
let gw = await startTestGateway(t)
const a = await provision(gw)
const b = await provision(gw)
const N = 250
const inputs = Array.from({ length: N }, (_, i) => receiptOf(a, i, (i + 1) * 60_000, i === 7 ? { token: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed' } : {}))
const test = receiptOf(a, 9999, 30_000, { test: true })
const other = Array.from({ length: 5 }, (_, i) => receiptOf(b, i, (i + 1) * 90_000))
const hitId = receiptIdOf(a.sourceId, inputs[3]!.signal_id)
gw = await seedReceipts(t, gw, [...inputs, test, ...other], {
  more: async (store) => {
    const scored = new Date().toISOString()
    await store.recordOutcomes([{ receipt_id: hitId, window_start: inputs[3]!.emitted_at, window_end: scored, baseline: 1.5, outcome: 'hit', scored_at: scored }])
    await store.recordDisputeStatuses([{ source_id: a.sourceId, signal_id: inputs[5]!.signal_id, emitted_at: inputs[5]!.emitted_at, dispute_status: 'open', changed_at: scored }])
  },
})

const list = (path: string, token = a.creatorToken) => call(gw.url, 'GET', path, { token })
const listA = (q = '') => list(`/v1/byo/sources/${a.sourceId}/receipts${q}`)

async function walk(path: (cursor: string | null) => string, token = a.creatorToken): Promise<string[]> {
  const ids: string[] = []
  let cursor: string | null = null
  for (let pages = 0; pages < 100; pages++) {
    const res = await list(path(cursor), token)
    if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(res.body)}`)
    ids.push(...res.body.data.map((r: any) => r.receipt_id))
    cursor = res.body.next_cursor
    if (cursor === null) return ids
  }
  throw new Error('the walk did not end')
}

const expectedOrder = inputs.map((i) => receiptIdOf(a.sourceId, i.signal_id)) // newest first: i = 0 is the youngest

t.test('a list answers ok, data and next_cursor; 100 by default, newest first (emitted_at, then receipt_id, descending)', async (t) => {
  const res = await listA()
  t.equal(res.status, 200)
  t.equal(res.body.ok, true)
  t.equal(res.body.data.length, 100)
  t.type(res.body.next_cursor, 'string')
  t.same(res.body.data.map((r: any) => r.receipt_id), expectedOrder.slice(0, 100))
  const first = res.body.data[0]
  t.match(first, { source_id: a.sourceId, agent_id: a.agentId, signal_id: inputs[0]!.signal_id, key_id: a.keyId, severity: inputs[0]!.severity, note: 'note 0', outcome: 'pending', dispute_status: 'none', test: false })
  const last = await listA('?limit=1000')
  t.equal(last.body.data.length, N, 'test receipts are left out unless asked for')
  t.equal(last.body.next_cursor, null, 'the last page has a null cursor')
})

t.test('walking every page returns each receipt once, in order', async (t) => {
  const ids = await walk((c) => `/v1/byo/sources/${a.sourceId}/receipts?limit=37${c === null ? '' : `&cursor=${c}`}`)
  t.same(ids, expectedOrder)
})

t.test('filters: outcome, status, severity, token, from and to', async (t) => {
  t.same((await listA('?outcome=hit')).body.data.map((r: any) => r.receipt_id), [hitId])
  const hit = (await listA('?outcome=hit')).body.data[0]
  t.match(hit, { outcome: 'hit', baseline: 1.5 })
  t.same((await listA('?status=open')).body.data.map((r: any) => r.signal_id), [inputs[5]!.signal_id])
  t.same((await listA('?token=0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed')).body.data.map((r: any) => r.signal_id), [inputs[7]!.signal_id])
  const critical = (await listA('?severity=critical&limit=1000')).body.data
  t.equal(critical.length, inputs.filter((i) => i.severity === 'critical').length)
  t.ok(critical.every((r: any) => r.severity === 'critical'))
  const from = inputs[20]!.emitted_at
  const to = inputs[10]!.emitted_at
  const window = (await listA(`?from=${from}&to=${to}&limit=1000`)).body.data.map((r: any) => r.signal_id)
  t.same(window, inputs.slice(11, 21).map((i) => i.signal_id), 'from is inclusive, to exclusive')
  t.equal((await listA('?outcome=pending&limit=1000')).body.data.length, N - 1)
})

t.test('bad query parameters are 400 invalid_request naming the parameter', async (t) => {
  const cursor = (await listA('?limit=2')).body.next_cursor
  for (const [q, name] of [
    ['?limit=0', 'limit'], ['?limit=1001', 'limit'], ['?limit=ten', 'limit'], ['?from=yesterday', 'from'], ['?to=2025-13-01T00:00:00Z', 'to'],
    [`?from=2030-01-02T00:00:00Z&to=2030-01-01T00:00:00Z`, 'to'], ['?outcome=win', 'outcome'], ['?status=closed', 'status'], ['?severity=a%20b', 'severity'],
    ['?token=not-a-token!', 'token'], ['?colour=red', 'colour'], ['?limit=1&limit=2', 'limit'], ['?cursor=%%%', 'cursor'], ['?cursor=abc', 'cursor'],
    [`?cursor=${cursor}&outcome=hit`, 'cursor'], ['?include_test=yes', 'include_test'], ['?source_id=x', 'source_id'],
  ] as const) {
    const res = await listA(q)
    t.equal(res.status, 400, q)
    t.equal(res.body.error?.code, 'invalid_request', q)
    t.match(res.body.error?.message, name, `${q} names ${name}`)
  }
})

t.test('GET /v1/byo/receipts reads every source the caller may, with source_id and agent_id filters', async (t) => {
  const own = await list('/v1/byo/receipts?limit=1000')
  t.equal(own.status, 200)
  t.equal(own.body.data.length, N, 'a creator reads its own sources, no one else\'s')
  const admin = await list('/v1/byo/receipts?limit=1000', gw.adminToken)
  t.equal(admin.body.data.length, N + other.length, 'the admin reads all')
  const dates = admin.body.data.map((r: any) => Date.parse(r.emitted_at))
  t.same(dates, [...dates].sort((x, y) => y - x), 'newest first across sources')
  t.equal((await list(`/v1/byo/receipts?source_id=${b.sourceId}`, gw.adminToken)).body.data.length, other.length)
  t.equal((await list(`/v1/byo/receipts?agent_id=${b.agentId}`, gw.adminToken)).body.data.length, other.length)
  t.equal((await list(`/v1/byo/receipts?source_id=${b.sourceId}`)).body.data.length, 0, 'a source_id of another creator finds nothing')
  const ids = await walk((c) => `/v1/byo/receipts?limit=64${c === null ? '' : `&cursor=${c}`}`, gw.adminToken)
  t.equal(ids.length, N + other.length)
  t.equal(new Set(ids).size, ids.length, 'each once')
})

t.test('GET /v1/byo/receipts/:receipt_id', async (t) => {
  const res = await list(`/v1/byo/receipts/${hitId}`)
  t.equal(res.status, 200)
  t.match(res.body.data, { receipt_id: hitId, outcome: 'hit', signal_id: inputs[3]!.signal_id })
  t.notOk('next_cursor' in res.body)
  for (const id of [receiptIdOf(a.sourceId, 'never-sent'), 'rc_nothex', 'x']) t.equal((await list(`/v1/byo/receipts/${id}`)).status, 404, id)
  t.equal((await list(`/v1/byo/receipts/${hitId}?x=1`)).status, 400)
})

t.test('the creator asks for its test receipts with include_test=true', async (t) => {
  // The recorder also keeps the onboarding's own test signal, so the seeded one is looked for among them.
  const withTest = (await listA('?include_test=true&limit=1000')).body.data
  t.equal(withTest.find((r: any) => r.receipt_id === receiptIdOf(a.sourceId, test.signal_id))?.test, true)
  t.notOk((await listA('?limit=1000')).body.data.some((r: any) => r.test === true), 'none without include_test')
})

t.test('a walk returns each receipt once even while receipts arrive between its pages (and across a restart)', async (t) => {
  const path = (c: string | null) => `/v1/byo/sources/${a.sourceId}/receipts?limit=40${c === null ? '' : `&cursor=${c}`}`
  const seen: string[] = []
  let res = await list(path(null))
  seen.push(...res.body.data.map((r: any) => r.receipt_id))
  res = await list(path(res.body.next_cursor))
  seen.push(...res.body.data.map((r: any) => r.receipt_id))
  const cursor = res.body.next_cursor as string
  // New receipts: some newer than the whole walk, some between receipts not yet reached.
  const newer = Array.from({ length: 5 }, (_, i) => receiptOf(a, 20_000 + i, 1000 + i))
  const behind = Array.from({ length: 5 }, (_, i) => receiptOf(a, 30_000 + i, (150 + i * 10) * 60_000 + 30_000))
  gw = await seedReceipts(t, gw, [...newer, ...behind])
  let next: string | null = cursor
  while (next !== null) {
    const page = await list(path(next))
    t.equal(page.status, 200)
    seen.push(...page.body.data.map((r: any) => r.receipt_id))
    next = page.body.next_cursor
  }
  t.equal(new Set(seen).size, seen.length, 'no receipt twice')
  t.same(expectedOrder.filter((id) => !seen.includes(id)), [], 'every receipt there at the start is met')
  t.same(seen.filter((id) => newer.some((n) => receiptIdOf(a.sourceId, n.signal_id) === id)), [], 'receipts newer than the walk are ahead of it')
  t.equal(seen.filter((id) => behind.some((n) => receiptIdOf(a.sourceId, n.signal_id) === id)).length, behind.length, 'receipts in the part not yet walked are met')
})
