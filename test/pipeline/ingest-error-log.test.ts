import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { IngestErrorLog, openJournal, type IngestErrorRecord } from '../../pipeline/index.js'

/** Segments small enough that a few dozen refusals roll several of them. */
const SEGMENT_BYTES = 2048
const KEPT_SEGMENTS = 3

function refusal(i: number): IngestErrorRecord {
  return { request_id: `req-${i}`, time: new Date(1_700_000_000_000 + i).toISOString(), status: 401, code: 'invalid_signature', key_id: null, signal_id: null }
}

async function openErrors(dir: string) {
  const log = await openJournal({ dir, fsync: 'never', segmentBytes: SEGMENT_BYTES, maxSegments: KEPT_SEGMENTS, dedupWindowMs: 0 })
  const errors = new IngestErrorLog(log, { perSource: 1000, onWriteError: (err) => t.fail(`write failed: ${String(err)}`) })
  await errors.load(0)
  return { log, errors }
}

/** Lets the records queued for after the answer be kept and appended. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

t.test('a cursor names the same refusal after a restart that dropped the oldest segments', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-errors-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))

  const first = await openErrors(dir)
  // Two sources interleaved, so per-source numbers differ from the log's own.
  for (let i = 0; i < 60; i++) first.errors.record(i % 2 === 0 ? 'src_a' : 'src_b', refusal(i))
  await settle()
  const page1 = first.errors.page('src_a', 3, undefined)
  t.ok(page1?.nextCursor, 'a first page with more behind it')
  const cursor = page1?.nextCursor ?? undefined
  const before = first.errors.page('src_a', 3, cursor)
  await first.log.close()

  const second = await openErrors(dir)
  t.teardown(() => second.log.close())
  t.ok(second.log.info().firstSeq > 1, 'retention dropped the oldest records at reopen')
  const after = second.errors.page('src_a', 3, cursor)
  t.same(
    after?.items.map((r) => r.request_id),
    before?.items.map((r) => r.request_id),
    'the same records follow the cursor',
  )
  t.same(
    second.errors.page('src_a', 1, undefined)?.items.map((r) => r.request_id),
    ['req-58'],
    'the newest refusal is still first',
  )

  // New refusals continue the numbering: an old cursor does not reach them.
  second.errors.record('src_a', refusal(100))
  await settle()
  t.same(second.errors.page('src_a', 1, undefined)?.items.map((r) => r.request_id), ['req-100'])
  t.same(second.errors.page('src_a', 3, cursor)?.items.map((r) => r.request_id), before?.items.map((r) => r.request_id))
})
