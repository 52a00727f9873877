import { appendFile, link, mkdir, mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test as Tap } from 'tap'
import { IngestErrorLog, openJournal, type IngestErrorRecord } from '../../pipeline/index.js'

function refusal(i: number): IngestErrorRecord {
  return { request_id: `req-${i}`, time: new Date(1_700_000_000_000 + i).toISOString(), status: 401, code: 'invalid_signature', key_id: null, signal_id: null, client_address: '192.0.2.7' }
}

/** A verified refusal: the request's nonce was claimed. */
function signedRefusal(i: number): [IngestErrorRecord, string] {
  return [{ ...refusal(i), status: 400, code: 'invalid_severity', key_id: 'key_a' }, `nonce-${i}`]
}

async function folder(t: Tap) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-errors-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

async function openErrors(t: Tap, dir: string, options: { perSource?: number; maxUnverified?: number } = {}) {
  const errors = await IngestErrorLog.open(dir, { perSource: 1000, maxUnverified: 100_000, ...options, onWriteError: (err) => t.fail(`write failed: ${String(err)}`), onWarning: (m) => t.fail(m) })
  await errors.load(0)
  return errors
}

/** Every request id a source lists, newest first, page by page. */
function listAll(errors: IngestErrorLog, source: string, limit = 1000): string[] {
  const ids: string[] = []
  for (let cursor: string | undefined, page; (page = errors.page(source, limit, cursor)) !== undefined; cursor = page.nextCursor) {
    ids.push(...page.items.map((r) => r.request_id))
    if (page.nextCursor === null) break
  }
  return ids
}

/** Lets the records queued for after the answer be kept and appended. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

const historyFile = async (dir: string) => {
  const names = (await readdir(dir)).filter((n) => n.endsWith('.jsonl'))
  if (names.length !== 1) throw new Error(`expected one history file, found ${names.join(', ')}`)
  return join(dir, names[0] as string)
}

t.test('a cursor names the same refusal after a restart, and after one that lost the newest records it reaches none of the new ones', async (t) => {
  const dir = await folder(t)
  const first = await openErrors(t, dir)
  // Two sources interleaved, so per-source numbers differ from the file's own order.
  for (let i = 0; i < 60; i++) first.record(i % 2 === 0 ? 'src_a' : 'src_b', refusal(i))
  await settle()
  const cursor = first.page('src_a', 3, undefined)?.nextCursor ?? undefined
  t.ok(cursor, 'a first page with more behind it')
  const before = first.page('src_a', 3, cursor)?.items.map((r) => r.request_id)
  await first.close()

  const second = await openErrors(t, dir)
  t.same(second.page('src_a', 3, cursor)?.items.map((r) => r.request_id), before, 'the same records follow the cursor')
  t.same(listAll(second, 'src_a').length, 30, 'every refusal is back')
  await second.close()

  // A crash that lost the newest half of the file: src_a keeps req-0 to req-28. A new
  // refusal comes after a restart; its number must come after every number given before,
  // the lost ones included, or the old cursor (at req-54) would reach it.
  const path = await historyFile(dir)
  const lines = (await readFile(path, 'utf8')).split('\n').filter(Boolean)
  await writeFile(path, `${lines.slice(0, 30).join('\n')}\n`)
  const third = await openErrors(t, dir)
  third.record('src_a', refusal(100))
  await settle()
  t.same(third.page('src_a', 1, undefined)?.items.map((r) => r.request_id), ['req-100'], 'the new refusal is listed first')
  t.same(third.page('src_a', 3, cursor)?.items.map((r) => r.request_id), ['req-28', 'req-26', 'req-24'], 'the old cursor reaches only records older than the one it names')
  await third.close()
})

t.test('a flood of refusals for one source, signed or not, pushes no other source\'s history off the disk, and the file stays bounded', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir, { perSource: 100, maxUnverified: 2000 })
  for (let i = 0; i < 30; i++) errors.record('eve', ...signedRefusal(i))
  for (let i = 30; i < 40; i++) errors.record('eve', refusal(i))
  await settle()
  // 120,000 refusals naming dave (about 24 MB of lines): a third signed, the rest junk.
  for (let i = 0; i < 120_000; i++) {
    if (i % 3 === 0) errors.record('dave', ...signedRefusal(100_000 + i))
    else errors.record('dave', refusal(100_000 + i))
    if (i % 5000 === 4999) await settle()
  }
  await settle()
  await errors.close()
  const size = (await stat(await historyFile(dir))).size
  t.ok(size < 12 * 1024 * 1024, `the file holds about what memory does, not the whole flood (${size} bytes)`)

  const reopened = await openErrors(t, dir, { perSource: 100, maxUnverified: 2000 })
  const eve = listAll(reopened, 'eve')
  t.equal(eve.length, 40, 'eve keeps every refusal, signed and not')
  t.same(eve.slice(0, 2), ['req-39', 'req-38'])
  const dave = listAll(reopened, 'dave')
  t.equal(dave.length, 200, 'dave keeps the newest of each kind, up to the bound')
  t.equal(dave[0], 'req-219999', 'the newest first')
  // Crash instead of close: what was appended is read back all the same.
  reopened.record('eve', ...signedRefusal(50))
  await settle()
  const afterCrash = await openErrors(t, dir, { perSource: 100, maxUnverified: 2000 })
  t.equal(listAll(afterCrash, 'eve')[0], 'req-50', 'a refusal appended before a kill -9 is back')
  await reopened.close()
  await afterCrash.close()
})

async function linkOnceCreated(existing: string, name: string): Promise<void> {
  for (let waited = 0; ; waited += 10) {
    try {
      return await link(existing, name)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || waited >= 5000) throw err
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
}

t.test('refusals made while the file is rewritten are kept once each', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir, { perSource: 100_000, maxUnverified: 1_000_000 })
  // Enough to pass the 8 MB at which the first rewrite starts, in steps, so records
  // keep coming while the rewrite yields to the event loop.
  let i = 0
  while (i < 60_000) {
    for (let j = 0; j < 500; j++, i++) errors.record(`s${i % 3}`, refusal(i))
    await settle()
    // A second name for the first file: it outlives the rewrite's removal of the first.
    // The file is created by the first write, which a loaded machine may not have run yet.
    if (i === 500) await linkOnceCreated(join(dir, 'refusals.1.jsonl'), join(dir, 'first'))
  }
  await errors.close()
  const reopened = await openErrors(t, dir, { perSource: 100_000, maxUnverified: 1_000_000 })
  const all = [0, 1, 2].flatMap((k) => listAll(reopened, `s${k}`, 10_000))
  t.equal(all.length, 60_000, 'none lost')
  t.equal(new Set(all).size, 60_000, 'none twice')
  const [mark, ...lines] = (await readFile(join(dir, 'refusals.2.jsonl'), 'utf8')).split('\n').filter(Boolean)
  t.equal(lines.length, 60_000, 'the file holds each record once')
  // The mark names where the appends made during the rewrite begin in the first file:
  // what comes before is the rewrite's copy of memory, what comes after follows that copy.
  const after = JSON.parse(mark as string).after as { generation: number; offset: number }
  t.equal(after.generation, 1, 'the rewritten file names the one it replaced')
  const first = await readFile(join(dir, 'first'))
  const ids = (text: string) => text.split('\n').filter(Boolean).map((l) => JSON.parse(l).request_id as string)
  const before = ids(first.subarray(0, after.offset).toString())
  const during = ids(first.subarray(after.offset).toString())
  t.ok(before.length > 0 && during.length > 0, `${before.length} lines before the mark, ${during.length} after`)
  t.same(lines.slice(before.length, before.length + during.length).map((l) => JSON.parse(l).request_id), during, 'the lines after the mark follow the copy in the new file')
  t.same(new Set(lines.slice(0, before.length).map((l) => JSON.parse(l).request_id)), new Set(before), 'the copy is what came before the mark')
  await reopened.close()
})

t.test('under a steady flood the file is rewritten again and again, one rewrite at a time, and the history survives each', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir, { perSource: 1000, maxUnverified: 100_000 })
  // About 30 MB of lines over 500 sources (rewrites come due every 8 MB or more), a hundred
  // per turn of the event loop: a rewrite comes due again while the last one is still
  // switching files.
  for (let i = 0; i < 150_000; i++) {
    errors.record(`src_${i % 500}`, refusal(i), i % 10 === 0 ? `nonce-${i}` : undefined)
    if (i % 100 === 99) await settle()
  }
  await errors.close()
  t.equal((await readdir(dir)).filter((n) => n.endsWith('.jsonl')).length, 1, 'one file, not none')
  const reopened = await openErrors(t, dir, { perSource: 1000, maxUnverified: 100_000 })
  t.equal(reopened.page('src_499', 1, undefined)?.items[0]?.request_id, 'req-149999', 'the newest refusal is back')
  t.equal(listAll(reopened, 'src_0').filter((id) => Number(id.slice(4)) % 10 === 0).length, 300, 'and every signed refusal of a source')
  await reopened.close()
})

t.test('a rewrite that fails is reported, tried again only after as much again is appended, and loses nothing', async (t) => {
  const dir = await folder(t)
  const failures: unknown[] = []
  const errors = await IngestErrorLog.open(dir, { perSource: 100_000, maxUnverified: 1_000_000, onWriteError: (err) => failures.push(err), onWarning: (m) => t.fail(m) })
  await errors.load(0)
  // The first rewrite writes generation 2 (the appends open generation 1): a folder in
  // place of its temporary makes the write fail, like a full disk.
  await mkdir(join(dir, 'refusals.2.jsonl.tmp'))
  let i = 0
  while (i < 60_000) {
    for (let j = 0; j < 500; j++, i++) errors.record('src', refusal(i))
    await settle()
  }
  await errors.close()
  t.equal(failures.length, 1, 'reported once, not at every batch after')
  t.match(String(failures[0]), /EISDIR/)
  await rm(join(dir, 'refusals.2.jsonl.tmp'), { recursive: true })
  const reopened = await openErrors(t, dir, { perSource: 100_000, maxUnverified: 1_000_000 })
  t.equal(listAll(reopened, 'src', 10_000).length, 60_000, 'every refusal is still on disk')
  await reopened.close()
})

t.test('a crash after a rewrite put its file in place but before appends moved to it loses none of the lines appended meanwhile', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir)
  for (let i = 0; i < 100; i++) errors.record(`s${i % 2}`, refusal(i))
  await errors.close()
  // As a crash leaves it: generation 2 holds what memory held when the rewrite began
  // (the first 60), generation 1 also the 40 appended while it was written.
  const lines = (await readFile(join(dir, 'refusals.1.jsonl'), 'utf8')).split('\n').filter(Boolean)
  await writeFile(join(dir, 'refusals.2.jsonl'), `${lines.slice(0, 60).join('\n')}\n`)
  const reopened = await openErrors(t, dir)
  t.equal(listAll(reopened, 's0').length + listAll(reopened, 's1').length, 100, 'all 100, each once')
  t.same(listAll(reopened, 's1').slice(0, 2), ['req-99', 'req-97'])
  t.same((await readdir(dir)).filter((n) => n.endsWith('.jsonl')), ['refusals.3.jsonl'], 'rewritten as one file; the older ones removed after')
  await reopened.close()
  const again = await openErrors(t, dir)
  t.equal(listAll(again, 's0').length + listAll(again, 's1').length, 100, 'and so after the next start')
  await again.close()
})

t.test('after such a crash, what the rewrite left out stays out: the old file is read only from where its appends began', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir)
  for (let i = 0; i < 10; i++) errors.record(i < 4 ? 'cut' : 'kept', refusal(i))
  await errors.close()
  // Generation 2 as a rewrite writes it when memory had cut source "cut" to nothing (its
  // bound on unsigned refusals is shared with every source): the mark, then what memory
  // held (req-4 to req-7). req-8 and req-9 were appended while it was written.
  const lines = (await readFile(join(dir, 'refusals.1.jsonl'), 'utf8')).split('\n').filter(Boolean).map((l) => `${l}\n`)
  const offset = Buffer.byteLength(lines.slice(0, 8).join(''))
  await writeFile(join(dir, 'refusals.2.jsonl'), `${JSON.stringify({ after: { generation: 1, offset } })}\n${lines.slice(4, 8).join('')}`)
  const reopened = await openErrors(t, dir)
  t.same(listAll(reopened, 'kept'), ['req-9', 'req-8', 'req-7', 'req-6', 'req-5', 'req-4'], 'the snapshot, and the appends after the mark')
  t.same(listAll(reopened, 'cut'), [], 'what was cut before the snapshot does not come back')
  await reopened.close()
})

t.test('appended refusals are synced within a second, once for a burst, so a crash of the machine loses at most that second', async (t) => {
  const dir = await folder(t)
  // Counts the syncs of every file handle (the history's own is opened inside).
  const probe = await open(join(dir, 'probe'), 'w')
  const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const datasync = proto.datasync
  let syncs = 0
  proto.datasync = function (this: unknown) {
    syncs++
    return datasync.call(this)
  }
  t.teardown(() => {
    proto.datasync = datasync
  })
  const errors = await openErrors(t, dir)
  for (let i = 0; i < 50; i++) {
    errors.record('src', refusal(i))
    await settle()
  }
  t.equal(syncs, 0, 'not line by line')
  await new Promise((resolve) => setTimeout(resolve, 1300))
  t.equal(syncs, 1, 'one sync for the burst, within a second')
  errors.record('src', refusal(50))
  await new Promise((resolve) => setTimeout(resolve, 1300))
  t.equal(syncs, 2, 'and again for what came after it')
  await errors.close()
})

t.test('a refusal recorded after a crash tore the last line is not lost with it', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir)
  for (let i = 0; i < 3; i++) errors.record('src', refusal(i))
  await errors.close()
  await appendFile(join(dir, 'refusals.1.jsonl'), '{"request_id":"req-torn","ti')
  const reopened = await openErrors(t, dir)
  reopened.record('src', refusal(10))
  await reopened.close()
  const again = await openErrors(t, dir)
  t.same(listAll(again, 'src'), ['req-10', 'req-2', 'req-1', 'req-0'])
  await again.close()
})

t.test('a torn or damaged line is skipped; the rest is read', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir)
  for (let i = 0; i < 5; i++) errors.record('src', refusal(i))
  await errors.close()
  const path = await historyFile(dir)
  const lines = (await readFile(path, 'utf8')).split('\n').filter(Boolean)
  lines[1] = '{"broken'
  await writeFile(path, `${lines.join('\n')}\n{"source_id":"src","tor`)
  const reopened = await openErrors(t, dir)
  t.same(listAll(reopened, 'src'), ['req-4', 'req-3', 'req-2', 'req-0'])
  await reopened.close()
})

t.test('a refusal kept by an earlier version, without its client address, is listed with client_address null; a new one with its address', async (t) => {
  const dir = await folder(t)
  const errors = await openErrors(t, dir)
  errors.record('src', refusal(0))
  await errors.close()
  const { client_address, ...old } = refusal(1)
  t.equal(client_address, '192.0.2.7')
  await appendFile(await historyFile(dir), `${JSON.stringify({ ...old, source_id: 'src', n: 1_700_000_000_001 * 1024 })}\n`)
  const reopened = await openErrors(t, dir)
  const items = reopened.page('src', 10, undefined)?.items ?? []
  t.strictSame(items.map((r) => [r.request_id, r.client_address]), [['req-1', null], ['req-0', '192.0.2.7']])
  await reopened.close()
})

t.test('a history kept by an earlier version as signal-log segments is read once and moved to the new file', async (t) => {
  const dir = await folder(t)
  const legacy = await openJournal({ dir, fsync: 'never', segmentBytes: 2048, maxSegments: 3, dedupWindowMs: 0 })
  for (let i = 0; i < 20; i++) {
    const { request_id, time, status, code, key_id, signal_id } = refusal(i)
    await legacy.append('', Buffer.from(JSON.stringify({ request_id, time, status, code, key_id, signal_id, source_id: 'src', n: i + 1, ...(i === 19 && { nonce: 'n-19', key_id: 'key_a' }) })))
  }
  await legacy.close()
  const errors = await IngestErrorLog.open(dir, { perSource: 1000, maxUnverified: 100_000, onWriteError: (err) => t.fail(String(err)), onWarning: (m) => t.fail(m) })
  const nonces = await errors.load(0)
  t.same(nonces, [{ sourceId: 'src', keyId: 'key_a', nonce: 'n-19', time: 1_700_000_000_019 }], 'the nonce a refused request claimed is handed back')
  const listed = listAll(errors, 'src')
  t.ok(listed.length > 0, `what the old ring still held (${listed.length})`)
  t.equal(listed[0], 'req-19')
  t.same((await readdir(dir)).filter((n) => n.endsWith('.seg')), [], 'the old segments are gone')
  await errors.close()
  const again = await openErrors(t, dir)
  t.same(listAll(again, 'src'), listed, 'and the history is in the new file')
  await again.close()
})

t.test('old segments stay until their history is in the new file: a failed move keeps them for the next start', async (t) => {
  const dir = await folder(t)
  const legacy = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0 })
  for (let i = 0; i < 5; i++) {
    const { request_id, time, status, code, key_id, signal_id } = refusal(i)
    await legacy.append('', Buffer.from(JSON.stringify({ request_id, time, status, code, key_id, signal_id, source_id: 'src', n: i + 1 })))
  }
  await legacy.close()
  // A folder in place of the new file's temporary: the move fails like a full disk.
  await mkdir(join(dir, 'refusals.1.jsonl.tmp'))
  const failures: unknown[] = []
  const errors = await IngestErrorLog.open(dir, { perSource: 1000, maxUnverified: 100_000, onWriteError: (err) => failures.push(err), onWarning: (m) => t.fail(m) })
  await errors.load(0)
  t.ok(failures.length > 0, 'the failure is reported')
  t.equal(listAll(errors, 'src').length, 5, 'the history is served from memory meanwhile')
  t.ok((await readdir(dir)).some((n) => n.endsWith('.seg')), 'the segments are kept')
  await errors.close()
  await rm(join(dir, 'refusals.1.jsonl.tmp'), { recursive: true })
  const again = await openErrors(t, dir)
  t.same(listAll(again, 'src'), ['req-4', 'req-3', 'req-2', 'req-1', 'req-0'], 'and read at the next start')
  t.same((await readdir(dir)).filter((n) => n.endsWith('.seg')), [], 'then moved')
  await again.close()
})

t.test('a damaged history of an earlier version does not stop the start: none of it is listed, a warning says so, and its files stay', async (t) => {
  const dir = await folder(t)
  const legacy = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0 })
  const { request_id, time, status, code, key_id, signal_id } = refusal(0)
  await legacy.append('', Buffer.from(JSON.stringify({ request_id, time, status, code, key_id, signal_id, source_id: 'src', n: 1 })))
  await legacy.append('', Buffer.from('{"request_id": "req-1", '))
  await legacy.close()
  const warnings: string[] = []
  const errors = await IngestErrorLog.open(dir, { perSource: 1000, maxUnverified: 100_000, onWriteError: (err) => t.fail(String(err)), onWarning: (m) => warnings.push(m) })
  t.same(await errors.load(0), [])
  t.match(warnings, [/ingest-error history of an earlier version could not be read/])
  t.same(listAll(errors, 'src'), [], 'all or nothing: not even the record before the damage')
  t.ok((await readdir(dir)).some((n) => n.endsWith('.seg')), 'the segments are kept')
  errors.record('src', refusal(2))
  await new Promise((r) => setImmediate(r))
  t.same(listAll(errors, 'src'), ['req-2'], 'and new refusals are recorded')
  await errors.close()
})

t.test('unsigned refusals share one bound over all sources: the sources with the most lose their oldest, the others keep theirs', async (t) => {
  const errors = await openErrors(t, await folder(t), { maxUnverified: 1000 })
  t.teardown(() => errors.close())
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
  const errors = await openErrors(t, await folder(t), { perSource: 10 })
  t.teardown(() => errors.close())
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
