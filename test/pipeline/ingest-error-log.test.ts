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
  const errors = new IngestErrorLog(log, { perSource: 1000, maxUnverified: 100_000, onWriteError: (err) => t.fail(`write failed: ${String(err)}`) })
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

t.test('unsigned refusals share one bound over all sources: the sources with the most lose their oldest, the others keep theirs', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-errors-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const log = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const errors = new IngestErrorLog(log, { perSource: 1000, maxUnverified: 1000, onWriteError: (err) => t.fail(String(err)) })
  const count = (source: string) => {
    let n = 0
    for (let cursor: string | undefined, page; (page = errors.page(source, 1000, cursor)) !== undefined; cursor = page.nextCursor) {
      n += page.items.length
      if (page.nextCursor === null) break
    }
    return n
  }
  // A quiet source with 20, then junk naming 40 other sources, 40 each (1,600 in all).
  for (let i = 0; i < 20; i++) errors.record('quiet', refusal(i))
  for (let i = 0; i < 1600; i++) errors.record(`junk-${i % 40}`, refusal(1000 + i))
  // One verified refusal (a claimed nonce) is never cut by the shared bound.
  errors.record('junk-0', { ...refusal(9999), code: 'replayed_nonce', key_id: 'key_a' }, 'nonce-1')
  await settle()
  t.equal(count('quiet'), 20, 'the quiet source keeps all its refusals')
  const junk = Array.from({ length: 40 }, (_, i) => count(`junk-${i}`))
  const total = 20 + junk.reduce((a, b) => a + b, 0) - 1
  t.ok(total <= 1250, `the unverified rings stay within the bound and its step (${total})`)
  t.ok(junk.slice(1).every((n) => n < 40), 'the sources with the most junk lost some')
  t.ok(junk.every((n) => n > 0), 'and none lost all of it')
  t.equal(errors.page('junk-0', 1, undefined)?.items[0]?.code, 'replayed_nonce', 'the verified refusal is still there')
})

t.test('a source lists at most INGEST_ERRORS_PER_SOURCE refusals of each kind, the newest, though its rings are trimmed in steps', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-errors-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const log = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const errors = new IngestErrorLog(log, { perSource: 10, maxUnverified: 100_000, onWriteError: (err) => t.fail(String(err)) })
  // 12 of each: past the bound of 10, below the step (12.5) at which a ring is trimmed.
  for (let i = 0; i < 12; i++) {
    errors.record('src', { ...refusal(2 * i), code: 'replayed_nonce', key_id: 'key_a' }, `nonce-${i}`)
    errors.record('src', refusal(2 * i + 1))
  }
  await settle()
  const listed: string[] = []
  for (let cursor: string | undefined, page; (page = errors.page('src', 7, cursor)) !== undefined; cursor = page.nextCursor) {
    listed.push(...page.items.map((r) => r.request_id))
    if (page.nextCursor === null) break
  }
  t.equal(listed.length, 20, 'ten of each kind')
  t.same(listed.slice(0, 2), ['req-23', 'req-22'], 'newest first')
  t.notOk(listed.includes('req-0') || listed.includes('req-1') || listed.includes('req-2') || listed.includes('req-3'), 'the two oldest of each kind are not shown')
})
