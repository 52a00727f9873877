import { parse } from 'csv-parse/sync'
import { parquetReadObjects } from 'hyparquet'
import t from 'tap'
import type { ExportFormat } from '../../receipts/index.js'
import { receiptIdOf } from '../../receipts/index.js'
import { chdbFolder, receiptInput } from '../helpers/receipts.js'
import { receiptsOnServer } from '../helpers/receipts-server.js'

/** Exports read back with a CSV parser, a Parquet reader and JSON.parse: counts and values. */
const folder = await chdbFolder(t)
const store = await folder.open()
// On the ClickHouse server path (test/on-clickhouse-server/) a third as many: the same
// formats and streaming over HTTP, at a cost the suite can carry; still several blocks
// and chunks per export.
const ROWS = receiptsOnServer() ? 20_000 : 60_000
// In batches as the recorder writes them; every 10th a test receipt, never exported.
for (let start = 0; start < ROWS; start += 10_000) {
  await store.record(Array.from({ length: 10_000 }, (_, i) => receiptInput(start + i, { source_id: (start + i) % 2 ? 'odd' : 'even', test: (start + i) % 10 === 3, note: (start + i) % 7 ? `note ${start + i}` : null })))
}
const exported = ROWS - ROWS / 10
await store.recordOutcomes([{ receipt_id: receiptIdOf('even', receiptInput(4).signal_id), window_start: '2025-01-01T00:00:00.000Z', window_end: '2025-01-02T00:00:00.000Z', baseline: 2.5, outcome: 'hit', scored_at: '2025-01-03T00:00:00.000Z' }])

async function bytesOf(format: ExportFormat, filter = {}): Promise<{ body: Buffer; chunks: number }> {
  const chunks: Buffer[] = []
  for await (const c of store.export(filter, format)) chunks.push(Buffer.from(c))
  return { body: Buffer.concat(chunks), chunks: chunks.length }
}

const sample = receiptInput(4)

t.test('NDJSON: one receipt per line, every field, no test receipts, in source_id then emitted_at order', async (t) => {
  const { body, chunks } = await bytesOf('ndjson')
  t.ok(chunks > 1, 'the body came in more than one chunk')
  const rows = body.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l))
  t.equal(rows.length, exported)
  t.notOk(rows.some((r) => 'test' in r))
  const r4 = rows.find((r) => r.signal_id === sample.signal_id)
  t.match(r4, { source_id: 'even', severity: 'high', token: sample.token, emitted_at: sample.emitted_at, received_at: sample.received_at, outcome: 'hit', baseline: 2.5, window_start: '2025-01-01T00:00:00.000Z', dispute_status: 'none', note: 'note 4', confidence: 4 })
  const keys = rows.map((r) => `${r.source_id} ${r.emitted_at} ${r.receipt_id}`)
  t.same(keys, [...keys].sort(), 'ordered by source_id, emitted_at, receipt_id')
})

t.test('CSV: a header line, then one record per receipt, read back by a CSV parser', async (t) => {
  const { body } = await bytesOf('csv', { source_id: 'odd' })
  // A bare empty field is null; a quoted one is the empty string.
  const rows = parse(body, { columns: true, cast: (value, context) => (context.quoting || value !== '' ? value : null) }) as Record<string, string | null>[]
  t.equal(rows.length, ROWS / 2 - ROWS / 10, 'the odd ones, less the test receipts (all odd)')
  t.same(Object.keys(rows[0]!), ['receipt_id', 'source_id', 'agent_id', 'signal_id', 'key_id', 'token', 'severity', 'confidence', 'note', 'emitted_at', 'received_at', 'recorded_at', 'window_start', 'window_end', 'baseline', 'outcome', 'dispute_status'])
  const r7 = rows.find((r) => r.signal_id === receiptInput(7).signal_id)
  t.match(r7, { source_id: 'odd', note: null, confidence: '7', emitted_at: receiptInput(7).emitted_at, outcome: 'pending' })
})

t.test('Parquet: one file, read back by a Parquet reader', async (t) => {
  const { body } = await bytesOf('parquet', { severity: 'high' })
  const file = body.buffer.slice(body.byteOffset, body.byteOffset + body.byteLength) as ArrayBuffer
  const rows = (await parquetReadObjects({ file })) as Record<string, unknown>[]
  t.equal(rows.length, exported)
  const r4 = rows.find((r) => r.signal_id === sample.signal_id)
  t.equal(r4?.outcome, 'hit')
  t.equal(r4?.baseline, 2.5)
  t.equal(new Date(r4?.emitted_at as Date).toISOString(), sample.emitted_at)
})

t.test('an export stopped by its consumer or its AbortSignal ends, and the store keeps serving', async (t) => {
  let seen = 0
  for await (const c of store.export({}, 'ndjson')) {
    seen += c.byteLength
    break
  }
  t.ok(seen > 0)
  const ac = new AbortController()
  const started = store.export({}, 'csv', ac.signal)
  const chunks: number[] = []
  const err = await (async () => {
    for await (const c of started) {
      chunks.push(c.byteLength)
      ac.abort(new Error('client went away'))
    }
  })().catch((e: unknown) => e)
  t.match(err, { message: 'client went away' })
  t.equal(chunks.length, 1, 'nothing more was fetched after the abort')
  t.equal((await store.list({ limit: 1 })).receipts.length, 1)
})
