import t from 'tap'
import { isReceiptStoreError, receiptIdOf, ReceiptStoreError } from '../../receipts/index.js'
import { chdbFolder, receiptInput } from '../helpers/receipts.js'

const folder = await chdbFolder(t)
let store = await folder.open()

const scoring = (receipt_id: string, outcome: 'hit' | 'miss' | 'void', scored_at: string, baseline = 1) => ({
  receipt_id,
  window_start: '2025-01-01T00:00:00.000Z',
  window_end: '2025-01-01T01:00:00.000Z',
  baseline,
  outcome,
  scored_at,
})

t.test('a receipt is recorded once whatever the number of times its batch is recorded', async (t) => {
  const batch = [1, 2, 3].map((n) => receiptInput(n, { source_id: 'once' }))
  t.same(await store.record(batch), { recorded: 3, alreadyRecorded: 0 })
  t.same(await store.record(batch), { recorded: 0, alreadyRecorded: 3 })
  t.same(await store.record([...batch, receiptInput(4, { source_id: 'once' })]), { recorded: 1, alreadyRecorded: 3 })
  const page = await store.list({ source_id: 'once' })
  t.same(page.receipts.map((r) => r.signal_id), ['sig-000004', 'sig-000003', 'sig-000002', 'sig-000001'])
})

t.test('a receipt recorded before a restart is not recorded again after it, and keeps its first recorded_at', async (t) => {
  const batch = [10, 11].map((n) => receiptInput(n, { source_id: 'restart' }))
  await store.record(batch)
  const before = await store.get(receiptIdOf('restart', 'sig-000010'))
  await store.close()
  store = await folder.open()
  t.same(await store.record(batch), { recorded: 0, alreadyRecorded: 2 })
  t.equal((await store.list({ source_id: 'restart' })).receipts.length, 2)
  t.equal((await store.get(receiptIdOf('restart', 'sig-000010')))?.recorded_at, before?.recorded_at)
})

t.test('a signal_id accepted again later (other body, other time) never becomes a second receipt; the first stands', async (t) => {
  await store.record([receiptInput(20, { source_id: 'reuse', severity: 'low' })])
  const again = receiptInput(20, { source_id: 'reuse', severity: 'high', emitted_at: '2025-06-01T00:00:00.000Z', received_at: '2025-06-01T00:00:00.100Z' })
  t.same(await store.record([again]), { recorded: 0, alreadyRecorded: 1 })
  const page = await store.list({ source_id: 'reuse' })
  t.equal(page.receipts.length, 1)
  t.equal(page.receipts[0]?.severity, 'low')
})

t.test('two records of one signal_id in a batch make one receipt, from the first', async (t) => {
  const r = await store.record([receiptInput(30, { source_id: 'in-batch', note: 'first' }), receiptInput(30, { source_id: 'in-batch', note: 'second' })])
  t.same(r, { recorded: 1, alreadyRecorded: 1 })
  t.equal((await store.get(receiptIdOf('in-batch', 'sig-000030')))?.note, 'first')
})

t.test('text fields keep every character through the insert: quotes, backslashes, newlines, tabs, brackets, non-ASCII', async (t) => {
  const note = 'a "quoted" \\ back\\slash\nnew line\ttab [1,2] {"k":null} \u00e9\u4e2d\ud83d\ude80 \u0001'
  const input = receiptInput(45, { source_id: 'text "src"\n', note, confidence: 0 })
  await store.record([input])
  const r = await store.get(receiptIdOf('text "src"\n', input.signal_id))
  t.equal(r?.note, note)
  t.equal(r?.source_id, 'text "src"\n')
  t.equal(r?.confidence, 0)
  t.equal(r?.emitted_at, input.emitted_at)
})

t.test('a receipt carries every field, ISO 8601 UTC times with milliseconds, pending and none until scored or disputed', async (t) => {
  const input = receiptInput(40, { source_id: 'fields', confidence: null, note: null })
  await store.record([input])
  const r = await store.get(receiptIdOf('fields', input.signal_id))
  t.match(r, {
    receipt_id: receiptIdOf('fields', input.signal_id),
    source_id: 'fields',
    agent_id: 'agent-1',
    signal_id: input.signal_id,
    key_id: 'key-1',
    token: input.token,
    severity: 'high',
    confidence: null,
    note: null,
    emitted_at: input.emitted_at,
    received_at: input.received_at,
    window_start: null,
    window_end: null,
    baseline: null,
    outcome: 'pending',
    dispute_status: 'none',
    test: false,
  })
  t.match(r?.recorded_at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/)
})

t.test('get answers undefined for an unknown or malformed id', async (t) => {
  t.equal(await store.get(`rc_${'0'.repeat(32)}`), undefined)
  t.equal(await store.get("rc_' OR 1=1 --"), undefined)
})

t.test('a test receipt is listed only with includeTest and can be fetched by id', async (t) => {
  await store.record([receiptInput(50, { source_id: 'tests', test: true }), receiptInput(51, { source_id: 'tests' })])
  t.same((await store.list({ source_id: 'tests' })).receipts.map((r) => r.signal_id), ['sig-000051'])
  t.same((await store.list({ source_id: 'tests', includeTest: true })).receipts.map((r) => [r.signal_id, r.test]), [['sig-000051', false], ['sig-000050', true]])
  t.equal((await store.get(receiptIdOf('tests', 'sig-000050')))?.test, true)
})

t.test('outcomes: the newest scored_at wins, an older one changes nothing, a repeated post is harmless, refused items are named', async (t) => {
  await store.record([receiptInput(60, { source_id: 'scored' }), receiptInput(61, { source_id: 'scored', test: true })])
  const id = receiptIdOf('scored', 'sig-000060')
  const post = [scoring(id, 'miss', '2025-01-02T00:00:00.000Z', 5)]
  t.same(await store.recordOutcomes(post), { accepted: 1, refused: [] })
  t.same(await store.recordOutcomes(post), { accepted: 1, refused: [] })
  t.match(await store.get(id), { outcome: 'miss', baseline: 5 })
  await store.recordOutcomes([scoring(id, 'hit', '2025-01-03T00:00:00.000Z', 6)])
  await store.recordOutcomes([scoring(id, 'void', '2025-01-01T00:00:00.000Z', 7)])
  t.match(await store.get(id), { outcome: 'hit', baseline: 6, window_start: '2025-01-01T00:00:00.000Z', window_end: '2025-01-01T01:00:00.000Z' })
  t.equal((await store.list({ source_id: 'scored' })).receipts.length, 1, 'scoring rows never show as receipts of their own')
  const unknown = `rc_${'1'.repeat(32)}`
  const r = await store.recordOutcomes([
    scoring(id, 'hit', '2025-01-03T00:00:00.000Z'),
    scoring(unknown, 'hit', '2025-01-03T00:00:00.000Z'),
    { ...scoring(id, 'hit', '2025-01-03T00:00:00.000Z'), window_end: '2024-12-31T00:00:00.000Z' },
    scoring(receiptIdOf('scored', 'sig-000061'), 'hit', '2025-01-03T00:00:00.000Z'),
    { ...scoring(id, 'hit', '2025-01-03T00:00:00.000Z'), outcome: 'pending' as never },
  ])
  t.equal(r.accepted, 1)
  t.same(r.refused.map((x) => [x.index, x.reason]), [[1, 'unknown_receipt'], [2, 'invalid_item'], [3, 'unknown_receipt'], [4, 'invalid_item']])
  await t.rejects(store.recordOutcomes(Array.from({ length: 1001 }, () => post[0]!)), { code: 'invalid_argument' })
})

t.test('a dispute resolution outranks its opening in either order, and shows before the receipt is recorded', async (t) => {
  const input = receiptInput(70, { source_id: 'disputes' })
  const at = (status: 'open' | 'disputed' | 'rejected', changed_at: string) => ({ source_id: 'disputes', signal_id: input.signal_id, emitted_at: input.emitted_at, dispute_status: status, changed_at })
  await store.recordDisputeStatuses([at('open', '2025-01-01T00:00:00.000Z')])
  t.equal(await store.get(receiptIdOf('disputes', input.signal_id)), undefined, 'no receipt until the recorder writes it')
  await store.record([input])
  t.equal((await store.get(receiptIdOf('disputes', input.signal_id)))?.dispute_status, 'open')
  await store.recordDisputeStatuses([at('rejected', '2025-01-02T00:00:00.000Z'), at('open', '2025-01-03T00:00:00.000Z')])
  t.equal((await store.get(receiptIdOf('disputes', input.signal_id)))?.dispute_status, 'rejected')
  t.same((await store.list({ source_id: 'disputes', status: 'rejected' })).receipts.length, 1)
  t.same((await store.list({ source_id: 'disputes', status: 'open' })).receipts.length, 0)
})

t.test('limit outside 1 to 1,000 and a malformed or foreign cursor are refused with typed errors', async (t) => {
  await store.record([1, 2, 3].map((n) => receiptInput(n, { source_id: 'limits' })))
  for (const limit of [0, 1001, 1.5, -1]) await t.rejects(store.list({ limit }), { code: 'invalid_argument' })
  await t.rejects(store.list({ cursor: 'not a cursor' }), { code: 'invalid_cursor' })
  await t.rejects(store.list({ cursor: Buffer.from('[1,5,"rc_x","y"]').toString('base64url') }), { code: 'invalid_cursor' })
  const page = await store.list({ source_id: 'limits', limit: 1 })
  t.ok(page.next_cursor)
  await t.rejects(store.list({ source_id: 'other', limit: 1, cursor: page.next_cursor! }), { code: 'invalid_cursor' }, 'a cursor only continues the list it was made for')
  const next = await store.list({ source_id: 'limits', limit: 1, cursor: page.next_cursor! })
  t.equal(next.receipts[0]?.signal_id, 'sig-000002')
  await t.rejects(store.record([receiptInput(1, { emitted_at: 'yesterday' })]), { code: 'invalid_argument' })
})

t.test('a filter value is a parameter, never SQL', async (t) => {
  await store.record([receiptInput(80, { source_id: "quote'src" })])
  t.equal((await store.list({ source_id: "quote'src" })).receipts.length, 1)
  t.equal((await store.list({ source_id: "x' OR '1'='1" })).receipts.length, 0)
})

t.test('a closed store refuses with store_closed; close is safe twice', async (t) => {
  const extra = await folder.open()
  await extra.close()
  await extra.close()
  const err = await extra.list({}).catch((e: unknown) => e)
  t.ok(isReceiptStoreError(err, 'store_closed'))
  t.equal((err as ReceiptStoreError).transient, false)
})

t.test('the schema is migrated once and a store newer than the code is refused', async (t) => {
  const { createClient } = await import('@clickhouse/client')
  const { createChdbConnection } = await import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path: folder.path }) as never })
  t.teardown(() => client.close())
  const versions = await (await client.query({ query: 'SELECT version FROM schema_migrations FINAL ORDER BY version', format: 'JSONEachRow' })).json<{ version: number }>()
  const { MIGRATIONS } = await import('../../receipts/migrations/index.js')
  t.same(versions, MIGRATIONS.map((m) => ({ version: m.version })), 'reopening did not apply them twice')
  // A confirmed insert is on disk: the recorder's durable acknowledgement follows it.
  const engines = await (await client.query({ query: "SELECT name, engine_full FROM system.tables WHERE database = currentDatabase() AND name IN ('receipts', 'receipt_ids') ORDER BY name", format: 'JSONEachRow' })).json<{ name: string; engine_full: string }>()
  t.equal(engines.length, 2)
  for (const e of engines) t.match(e.engine_full, /fsync_after_insert = 1.*fsync_part_directory = 1|fsync_part_directory = 1.*fsync_after_insert = 1/, `${e.name} syncs inserted parts`)
  await client.insert({ table: 'schema_migrations', values: [{ version: 99, name: 'from the future', applied_at: Date.now() }], format: 'JSONEachRow' })
  const newer = (await import('../../receipts/index.js')).ClickHouseReceiptStore
  const s = new newer({ target: { kind: 'chdb', path: folder.path, maxServerMemoryBytes: 1e9 } })
  await t.rejects(s.open(), { code: 'schema_too_new' })
  await s.close()
  await client.command({ query: 'DELETE FROM schema_migrations WHERE version = 99' })
})

t.test('a crash between the receipts and their look-up rows: a verified record lists them again and writes nothing twice', async (t) => {
  const { createClient } = await import('@clickhouse/client')
  const { createChdbConnection } = await import('chdb/connection')
  const client = createClient({ connection: createChdbConnection({ path: folder.path }) as never })
  t.teardown(() => client.close())
  const rawRows = async (source: string) =>
    Number((await (await client.query({ query: `SELECT count() AS n FROM receipts WHERE source_id = {s:String} AND signal_id != ''`, query_params: { s: source }, format: 'JSONEachRow' })).json<{ n: number | string }>())[0]!.n)
  // The look-up rows of these receipts lost, as a kill -9 between the two writes of the insert leaves them.
  const dropLookups = (source: string) => client.command({ query: `DELETE FROM receipt_ids WHERE source_id = {s:String}`, query_params: { s: source } })

  const batch = [30, 31, 32].map((n) => receiptInput(n, { source_id: 'crashed' }))
  await store.record(batch)
  await dropLookups('crashed')
  t.same(await store.record(batch, { verify: true }), { recorded: 0, alreadyRecorded: 3 }, 'found in the receipts themselves')
  t.equal(await rawRows('crashed'), 3, 'no row written twice')
  const reused = receiptInput(30, { source_id: 'crashed', emitted_at: '2025-07-01T00:00:00.000Z', received_at: '2025-07-01T00:00:00.100Z' })
  t.same(await store.record([reused]), { recorded: 0, alreadyRecorded: 1 }, 'listed again: a signal_id reused later is still known')

  // Without verify, the same loss writes the batch again: why the recorder verifies after a start or a failure.
  const control = [40, 41].map((n) => receiptInput(n, { source_id: 'unverified' }))
  await store.record(control)
  await dropLookups('unverified')
  t.same(await store.record(control), { recorded: 2, alreadyRecorded: 0 })
})

t.test('with its filter of recorded ids built, a store finds a signal_id accepted again whether recorded before or after the build, and looks up nothing for new ids', async (t) => {
  const other = await folder.open()
  await other.record([receiptInput(60, { source_id: 'filtered', severity: 'low' })])
  const filtered = await folder.open()
  await filtered.trackRecordedIds()
  const later = (n: number) => receiptInput(n, { source_id: 'filtered', severity: 'high', emitted_at: '2025-08-01T00:00:00.000Z', received_at: '2025-08-01T00:00:00.100Z' })
  t.same(await filtered.record([later(60)]), { recorded: 0, alreadyRecorded: 1 }, 'recorded before the build: listed by the store')
  t.same(await filtered.record([receiptInput(61, { source_id: 'filtered' })]), { recorded: 1, alreadyRecorded: 0 })
  t.same(await filtered.record([later(61)]), { recorded: 0, alreadyRecorded: 1 }, 'recorded since: added to the filter')
  // A new id is not looked up: a receipt another writer recorded after the build is not
  // seen without verify (why the recorder verifies what a previous holder may have written).
  await other.record([receiptInput(62, { source_id: 'filtered' })])
  t.same(await filtered.record([receiptInput(62, { source_id: 'filtered' })], { verify: true }), { recorded: 0, alreadyRecorded: 1 }, 'verify looks every id up')
  await other.record([receiptInput(63, { source_id: 'filtered' })])
  t.same(await filtered.record([receiptInput(63, { source_id: 'filtered' })]), { recorded: 1, alreadyRecorded: 0 }, 'unverified, a new id is not looked up')
  t.equal((await filtered.list({ source_id: 'filtered' })).receipts.find((r) => r.signal_id === 'sig-000060')?.severity, 'low', 'the first stands')
})
