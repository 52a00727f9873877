import { parse } from 'csv-parse/sync'
import { parquetReadObjects } from 'hyparquet'
import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { receiptOf, seedReceipts } from '../helpers/receipt-gateway.js'

// Receipts are put into the gateway's own chDB store with the real ClickHouseReceiptStore
// while it is stopped (seedReceipts); every export below is streamed over HTTP by the
// gateway from ClickHouse's own output.
let gw = await startTestGateway(t)
const small = await provision(gw)
const big = await provision(gw)
const odd = await provision(gw)
const admin = (path: string, body?: unknown) => call(gw.url, 'POST', path, { token: gw.adminToken, body })
const renterToken = (await admin('/v1/admin/tokens', { role: 'renter', subject: 'exporter' })).body.data.token as string
await admin('/v1/admin/rentals', { renter_id: 'exporter', source_id: small.sourceId })

const SMALL = 2000
const BIG = 150_000
const notes = ['plain', 'with, a comma', 'with "quotes"', 'two\nlines', null]
const smallInputs = Array.from({ length: SMALL }, (_, i) => receiptOf(small, i, (i + 1) * 1000, { note: notes[i % notes.length] as string | null, confidence: i % 4 === 0 ? null : i % 101 }))
const bigInputs = Array.from({ length: BIG }, (_, i) => receiptOf(big, i, (i + 1) * 10))
const scored = receiptIdOf(small.sourceId, smallInputs[10]!.signal_id)
// Notes a spreadsheet would run as formulas, and null next to the empty string.
const oddNotes = ['=HYPERLINK("x")', '+1', '-2', '@a', '\tz', '\rz', '', null, "'quoted already", 'a=b']
const oddInputs = oddNotes.map((note, i) => receiptOf(odd, i, (i + 1) * 1000, { note, confidence: i === 1 ? null : 7 }))
const negative = receiptIdOf(odd.sourceId, oddInputs[0]!.signal_id)
gw = await seedReceipts(t, gw, [...smallInputs, receiptOf(small, 99_999, 500, { test: true }), ...bigInputs, ...oddInputs], {
  more: async (store) => {
    const at = new Date().toISOString()
    await store.recordOutcomes([
      { receipt_id: scored, window_start: smallInputs[10]!.emitted_at, window_end: at, baseline: 0.25, outcome: 'miss', scored_at: at },
      { receipt_id: negative, window_start: oddInputs[0]!.emitted_at, window_end: at, baseline: -2.5, outcome: 'hit', scored_at: at },
    ])
  },
})
const bearer = (token: string) => ({ authorization: `Bearer ${token}` })
const exportOf = (path: string, token: string) => fetch(gw.url + path, { headers: bearer(token) })
const byId = new Map(smallInputs.map((i) => [receiptIdOf(small.sourceId, i.signal_id), i]))

t.test('CSV, read back with a CSV parser: the header, every receipt once, the values; no test receipt', async (t) => {
  const res = await exportOf(`/v1/byo/sources/${small.sourceId}/receipts/export?format=csv`, small.creatorToken)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'text/csv; charset=utf-8')
  t.match(res.headers.get('content-disposition'), /^attachment; filename="receipts-src_[A-Za-z0-9_-]+-\d{4}-\d{2}-\d{2}T\d{9}Z\.csv"$/)
  const rows = parse(Buffer.from(await res.arrayBuffer()), { columns: true }) as Record<string, string>[]
  t.equal(rows.length, SMALL)
  t.equal(new Set(rows.map((r) => r.receipt_id)).size, SMALL)
  for (const r of rows) {
    const input = byId.get(r.receipt_id as string)
    if (input === undefined) return t.fail(`unknown ${r.receipt_id}`)
    if (r.note !== (input.note ?? '') || r.signal_id !== input.signal_id || Date.parse(r.emitted_at as string) !== Date.parse(input.emitted_at)) return t.fail(`values of ${r.receipt_id}: ${JSON.stringify(r)}`)
  }
  t.match(rows.find((r) => r.receipt_id === scored), { outcome: 'miss', baseline: '0.25' })
})

t.test('CSV cells a spreadsheet would run as formulas get a leading quote, in text columns only; null is an empty field, the empty string ""', async (t) => {
  const res = await exportOf(`/v1/byo/sources/${odd.sourceId}/receipts/export?format=csv`, odd.creatorToken)
  t.equal(res.status, 200)
  const text = await res.text()
  // csv-parse tells a quoted field from a bare one: a bare empty field is null.
  const rows = parse(text, { columns: true, cast: (value, context) => (context.quoting || value !== '' ? value : null) }) as Record<string, string | null>[]
  t.equal(rows.length, oddNotes.length)
  const noteOf = new Map(rows.map((r) => [r.signal_id, r.note]))
  const expected = ["'=HYPERLINK(\"x\")", "'+1", "'-2", "'@a", "'\tz", "'\rz", '', null, "'quoted already", 'a=b']
  t.same(oddInputs.map((i) => noteOf.get(i.signal_id)), expected)
  const first = rows.find((r) => r.receipt_id === negative)!
  t.equal(first.baseline, '-2.5', 'a negative number is not touched')
  t.match(text, /,-2\.5,"hit",/, 'and goes out bare, as a number')
  t.equal(rows.find((r) => r.signal_id === oddInputs[1]!.signal_id)!.confidence, null, 'a null number is an empty field')
  t.ok(Date.parse(first.window_start ?? '') > 0, 'a scored receipt has its window')
  t.notOk(text.includes('\\N'), 'no \\N anywhere')
})

t.test('Parquet, read back with a Parquet reader; NDJSON line by line', async (t) => {
  const res = await exportOf(`/v1/byo/sources/${small.sourceId}/receipts/export?format=parquet&severity=critical`, small.creatorToken)
  t.equal(res.status, 200)
  t.equal(res.headers.get('content-type'), 'application/vnd.apache.parquet')
  const rows = (await parquetReadObjects({ file: await res.arrayBuffer() })) as Record<string, unknown>[]
  t.equal(rows.length, smallInputs.filter((i) => i.severity === 'critical').length)
  t.ok(rows.every((r) => r.severity === 'critical' && byId.get(r.receipt_id as string)?.note === r.note))
  const nd = await exportOf(`/v1/byo/receipts/export?format=ndjson&source_id=${small.sourceId}&outcome=miss`, small.creatorToken)
  t.equal(nd.headers.get('content-type'), 'application/x-ndjson')
  const lines = (await nd.text()).trimEnd().split('\n').map((l) => JSON.parse(l))
  t.same(lines.map((l) => l.receipt_id), [scored])
})

t.test('a renter exports its rented source; rows are metered per caller, read at /v1/usage and by the admin', async (t) => {
  const before = (await call(gw.url, 'GET', '/v1/usage', { token: renterToken })).body.data.rows_exported as number
  const res = await exportOf(`/v1/byo/sources/${small.sourceId}/receipts/export?format=csv`, renterToken)
  t.equal((parse(Buffer.from(await res.arrayBuffer()), { columns: true }) as unknown[]).length, SMALL)
  const pq = await exportOf(`/v1/byo/receipts/export?format=parquet`, renterToken)
  t.equal(((await parquetReadObjects({ file: await pq.arrayBuffer() })) as unknown[]).length, SMALL, 'across sources: the rented one')
  t.equal((await exportOf(`/v1/byo/sources/${big.sourceId}/receipts/export`, renterToken)).status, 404)
  const usage = await call(gw.url, 'GET', '/v1/usage', { token: renterToken })
  t.equal(usage.status, 200)
  t.equal(usage.body.data.rows_exported - before, 2 * SMALL, 'CSV rows (quoted newlines are not rows) and the Parquet file\'s rows')
  t.match(usage.body.data, { role: 'renter', subject: 'exporter', month: new Date().toISOString().slice(0, 7) })
  t.equal(usage.body.data.days.at(-1).day, new Date().toISOString().slice(0, 10))
  const seen = await call(gw.url, 'GET', '/v1/admin/usage?principal=renter:exporter', { token: gw.adminToken })
  t.equal(seen.body.data.rows_exported, usage.body.data.rows_exported)
  t.equal((await call(gw.url, 'GET', '/v1/admin/usage?principal=renter:exporter', { token: renterToken })).status, 403)
  for (const q of ['?principal=exporter', '?principal=renter:exporter&month=2025-13', '?who=renter:x']) t.equal((await call(gw.url, 'GET', `/v1/admin/usage${q}`, { token: gw.adminToken })).status, 400, q)
  t.equal((await call(gw.url, 'GET', '/v1/usage?month=2020-01', { token: renterToken })).body.data.rows_exported, 0)
})

t.test('export parameters: a bad format or filter is 400 naming it; test receipts are never exported', async (t) => {
  for (const [q, name] of [['?format=xlsx', 'format'], ['?limit=5', 'limit'], ['?include_test=true', 'include_test'], ['?from=x', 'from']] as const) {
    const res = await call(gw.url, 'GET', `/v1/byo/sources/${small.sourceId}/receipts/export${q}`, { token: small.creatorToken })
    t.equal(res.status, 400, q)
    t.match(res.body.error.message, name)
  }
})

t.test('an export continues strictly after the row `after` names, in the same order; a continued CSV has no header line; a malformed after is 400', async (t) => {
  const path = `/v1/byo/sources/${small.sourceId}/receipts/export`
  const whole = (await (await exportOf(`${path}?format=ndjson`, small.creatorToken)).text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, string>)
  t.equal(whole.length, SMALL)
  const cut = whole[1234]!
  const after = encodeURIComponent(`${cut.source_id},${cut.emitted_at},${cut.receipt_id}`)
  const rest = (await (await exportOf(`${path}?format=ndjson&after=${after}`, small.creatorToken)).text()).trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, string>)
  t.same(rest.map((r) => r.receipt_id), whole.slice(1235).map((r) => r.receipt_id), 'NDJSON: exactly the rows after it')
  const csv = await (await exportOf(`${path}?format=csv&after=${after}`, small.creatorToken)).text()
  t.notOk(csv.startsWith('"receipt_id"'), 'no header line: it appends to the file it continues')
  const rows = parse(csv, { columns: Object.keys(whole[0]!) }) as Record<string, string>[]
  t.same(rows.map((r) => r.receipt_id), whole.slice(1235).map((r) => r.receipt_id), 'CSV: exactly the rows after it')
  const last = whole.at(-1)!
  const none = await exportOf(`${path}?after=${encodeURIComponent(`${last.source_id},${last.emitted_at},${last.receipt_id}`)}`, small.creatorToken)
  t.equal((await none.text()), '', 'after the last row: nothing')
  for (const bad of ['x', `${cut.source_id},${cut.emitted_at}`, `${cut.source_id},yesterday,${cut.receipt_id}`, `${cut.source_id},${cut.emitted_at},${cut.receipt_id},x`]) {
    const res = await call(gw.url, 'GET', `${path}?after=${encodeURIComponent(bad)}`, { token: small.creatorToken })
    t.equal(res.status, 400, bad)
    t.match(res.body.error.message, /^after must be the last row's source_id,emitted_at,receipt_id/)
  }
})

async function rss(): Promise<number> {
  const page = await (await fetch(`${gw.url}/metrics`, { headers: bearer(gw.adminToken) })).text()
  return sampleValue(parsePrometheusText(page), 'process_resident_memory_bytes') as number
}

t.test(`a ${BIG.toLocaleString('en')}-row export streams with flat memory, and all of it arrives`, async (t) => {
  const base = await rss()
  const res = await exportOf(`/v1/byo/sources/${big.sourceId}/receipts/export?format=ndjson`, big.creatorToken)
  t.equal(res.status, 200)
  let bytes = 0
  let rows = 0
  let lastSample = 0
  const samples: { rows: number; rss: number }[] = []
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    bytes += chunk.length
    for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) rows++
    if (bytes - lastSample > 8 << 20) {
      lastSample = bytes
      samples.push({ rows, rss: await rss() })
    }
  }
  t.equal(rows, BIG)
  const peak = Math.max(base, ...samples.map((s) => s.rss))
  const firstHalf = Math.max(base, ...samples.filter((s) => s.rows <= BIG / 2).map((s) => s.rss))
  const mb = (n: number) => `${(n / 1e6).toFixed(0)} MB`
  t.comment(`exported ${mb(bytes)}; gateway RSS ${mb(base)} before, ${mb(firstHalf)} at most in the first half, ${mb(peak)} at most in all`)
  // The embedded engine's working set for the query (caches, read buffers) comes first and
  // is a fixed cost; what matters is that it then levels off.
  t.ok(peak - base < 256e6, `RSS grew ${mb(peak - base)} in all for ${mb(bytes)} exported`)
  t.ok(peak - firstHalf < 48e6, `the second half added ${mb(peak - firstHalf)}: memory levels off instead of growing with the rows`)
})

t.test('a client that goes away stops its export (its slot is free, fewer rows metered), and the gateway keeps serving; past the caps, 429', async (t) => {
  const before = (await call(gw.url, 'GET', '/v1/usage', { token: big.creatorToken })).body.data.rows_exported as number
  const controller = new AbortController()
  const res = await fetch(`${gw.url}/v1/byo/sources/${big.sourceId}/receipts/export?format=csv`, { headers: bearer(big.creatorToken), signal: controller.signal })
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  await reader.read()
  controller.abort()
  // Two exports held open by clients that do not read: the caller's cap (2) is reached.
  const held = [new AbortController(), new AbortController()]
  let holding: Response[] = []
  const deadline = Date.now() + 10_000
  // The aborted export's slot is given back once the gateway sees the connection close.
  while (holding.length < 2 && Date.now() < deadline) {
    const r = await fetch(`${gw.url}/v1/byo/sources/${big.sourceId}/receipts/export?format=ndjson`, { headers: bearer(big.creatorToken), signal: held[holding.length]!.signal })
    if (r.status === 200) holding.push(r)
    else await new Promise((resolve) => setTimeout(resolve, 100))
  }
  t.equal(holding.length, 2, 'the slot of the export whose client went away was given back')
  const third = await fetch(`${gw.url}/v1/byo/sources/${big.sourceId}/receipts/export`, { headers: bearer(big.creatorToken) })
  t.equal(third.status, 429)
  t.equal(third.headers.get('retry-after'), '5')
  t.equal(((await third.json()) as any).error.code, 'rate_limited')
  t.equal((await exportOf(`/v1/byo/sources/${small.sourceId}/receipts/export?format=csv`, small.creatorToken)).status, 200, 'another caller still exports')
  for (const c of held) c.abort()
  holding = []
  t.equal((await fetch(`${gw.url}/healthz`)).status, 200)
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${small.sourceId}/receipts?limit=1`, { token: small.creatorToken })).status, 200, 'reads go on')
  const after = (await call(gw.url, 'GET', '/v1/usage', { token: big.creatorToken })).body.data.rows_exported as number
  t.ok(after - before < 3 * BIG, `rows metered for the cut exports (${after - before}) are fewer than whole ones would be`)
})
