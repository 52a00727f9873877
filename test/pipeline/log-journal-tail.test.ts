/**
 * The journal's memory tail (pipeline/journal/tail-ring.ts): consumers at the log's end
 * are served from memory, with what the files hold; one behind it reads the files and
 * crosses into it with no gap and no duplicate; retention, loss reports and the rule that
 * a reader sees only durable records are as without it. Segment opens are counted by
 * wrapping `fs.promises.open`, which the segment reader calls for every file read.
 */
import fs from 'node:fs'
import { mkdtemp, open as fsOpen, rm } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { syncBuiltinESMExports } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openJournal } from '../../pipeline/log-journal.js'
import type { Journal, JournalOptions } from '../../pipeline/log-journal.js'
import type { LogRecord } from '../../pipeline/log.js'
import { copiesOf, TailRing } from '../../pipeline/journal/tail-ring.js'
import type { TapTest } from '../contracts/log-contract.js'

const WINDOW = 20 * 60_000
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const seqsOf = (records: readonly LogRecord[]): number[] => records.map((r) => r.seq)

/** A temp folder removed at teardown, and an opener that closes what it opened. */
async function journalDir(t: TapTest): Promise<{ dir: string; open: (o?: Partial<JournalOptions>) => Promise<Journal> }> {
  const dir = await mkdtemp(join(tmpdir(), 'journal-tail-test-'))
  const opened: Journal[] = []
  t.teardown(async () => {
    for (const log of opened) await log.close()
    await rm(dir, { recursive: true, force: true })
  })
  return {
    dir,
    open: async (o = {}) => {
      const log = await openJournal({ dir, fsync: 'always', dedupWindowMs: WINDOW, ...o })
      opened.push(log)
      return log
    },
  }
}

/** Counts opens of segment files for reading (the writer's opens of new segments aside) from now until teardown. */
function countSegmentOpens(t: TapTest): { readonly count: number; reset(): void } {
  const realOpen = fs.promises.open
  let count = 0
  fs.promises.open = ((path: fs.PathLike, ...rest: unknown[]) => {
    if (String(path).endsWith('.seg') && rest[0] === 'r') count++
    return (realOpen as (...a: unknown[]) => Promise<FileHandle>)(path, ...rest)
  }) as typeof fs.promises.open
  syncBuiltinESMExports()
  t.teardown(() => {
    fs.promises.open = realOpen
    syncBuiltinESMExports()
  })
  return {
    get count() {
      return count
    },
    reset: () => void (count = 0),
  }
}

async function appendN(log: Journal, from: number, to: number, sourceOf: (i: number) => string | undefined = () => undefined): Promise<void> {
  for (let i = from; i <= to; i++) {
    const sourceId = sourceOf(i)
    await log.append(`id-${i}`, bytes(`data ${i} `.padEnd(200, '.')), sourceId === undefined ? undefined : { sourceId })
  }
}

t.test('a consumer at the log end is served from memory, with exactly what the files hold', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ segmentBytes: 4096 })
  const c = await log.consumer('tail')
  const opens = countSegmentOpens(t)
  const got: LogRecord[] = []
  for (let i = 1; i <= 40; i++) {
    await log.append(`id-${i}`, bytes(`data ${i} `.padEnd(200 + i, '.')), { sourceId: i % 2 === 0 ? 'even' : 'odd' })
    // Each fetch waits at the end and is woken by the append, as the delivery tail is.
    if (i % 3 === 0) got.push(...(await c.fetch(100, 0)).records)
  }
  got.push(...(await c.fetch(100, 0)).records)
  const read = await log.read({ fromSeq: 1 }, 100)
  t.equal(opens.count, 0, 'no segment was opened for the fetches nor the read')
  t.same(seqsOf(got), Array.from({ length: 40 }, (_, i) => i + 1))
  await log.close()
  const again = await open({ segmentBytes: 4096 })
  const fromFiles = await again.read({ fromSeq: 1 }, 100)
  t.ok(opens.count > 1, `after a reopen the ring is empty and reads open the segments (${opens.count} opens)`)
  t.same(got, fromFiles, 'the consumer got records identical to the files, data included')
  t.same(read, fromFiles, 'so did a read')
  t.ok(got.every((r) => Object.getPrototypeOf(r.data) === Uint8Array.prototype), 'records have the shape of records read from a file')
})

t.test('a consumer waiting at the end is woken by an append and reads it from memory', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  await appendN(log, 1, 3)
  const c = await log.consumer('waiter', { startSeq: 4 })
  const opens = countSegmentOpens(t)
  const fetching = c.fetch(10, 10_000)
  await new Promise((r) => setTimeout(r, 20))
  await log.append('late', bytes('late'))
  t.same(seqsOf((await fetching).records), [4])
  t.equal(opens.count, 0)
})

t.test('a consumer behind the ring reads the files, then crosses into the ring with no gap and no duplicate', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ segmentBytes: 2048, tailCacheRecords: 10 })
  await appendN(log, 1, 50, (i) => (i % 3 === 0 ? 'three' : 'other'))
  const all = await log.consumer('all')
  const filtered = await log.consumer('three', { sourceId: 'three' })
  const opens = countSegmentOpens(t)
  const seen: number[] = []
  const opensPerFetch: number[] = []
  for (;;) {
    const before = opens.count
    const { records, lost } = await all.fetch(7, 0)
    t.equal(lost, null)
    if (records.length === 0) break
    opensPerFetch.push(opens.count - before)
    seen.push(...seqsOf(records))
    // More records arrive while it catches up, as they do at a real tail.
    if (seen.length === 21) await appendN(log, 51, 60, (i) => (i % 3 === 0 ? 'three' : 'other'))
  }
  t.same(seen, Array.from({ length: 60 }, (_, i) => i + 1), 'every record once, in order')
  t.ok(opensPerFetch[0]! > 0, 'the first fetches read the files')
  // The ring holds 51 to 60: the fetch of 50 to 56 starts before it (the files), 57 to 60 in it.
  t.same(opensPerFetch.slice(-2).map((n) => n > 0), [true, false], 'the last fetch was served from memory')

  const mine: LogRecord[] = []
  for (;;) {
    const { records } = await filtered.fetch(4, 0)
    if (records.length === 0) break
    mine.push(...records)
  }
  t.same(seqsOf(mine), Array.from({ length: 20 }, (_, i) => (i + 1) * 3), 'the filtered consumer got its source, across the boundary')
  t.ok(mine.every((r) => r.sourceId === 'three'))
  for (const r of mine) r.data.fill(0)
  const again = await log.read({ fromSeq: 51 }, 10)
  t.ok(again.every((r) => new TextDecoder().decode(r.data).startsWith(`data ${r.seq} `)), 'each its own copy: changing them changed nothing held')
  opens.reset()
  await appendN(log, 61, 63, () => 'three')
  t.same(seqsOf((await filtered.fetch(10, 0)).records), [61, 62, 63])
  t.equal(opens.count, 0, 'at the end, from memory')
})

t.test('records handed out are the reader\'s own: changing them changes nothing for another reader', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  await log.append('one', bytes('original'))
  const a = await log.consumer('a')
  const b = await log.consumer('b')
  const mine = (await a.fetch(1, 0)).records[0]!
  mine.data.fill(0x58)
  ;(mine as { dedupId: string }).dedupId = 'changed'
  const theirs = (await b.fetch(1, 0)).records[0]!
  t.equal(new TextDecoder().decode(theirs.data), 'original')
  t.equal(theirs.dedupId, 'one')
  t.equal(new TextDecoder().decode((await log.read({ fromSeq: 1 }, 1))[0]!.data), 'original')
})

t.test('records retention removed are not served from the ring: the loss is told as before', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ segmentBytes: 1024 })
  await appendN(log, 1, 40)
  const c = await log.consumer('behind')
  t.same(seqsOf((await c.fetch(10, 0)).records), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
  await c.ack(10)
  const report = await log.purge(30)
  t.ok(report.segments > 0, 'whole segments were removed')
  const { firstSeq } = await log.info()
  t.ok(firstSeq > 11 && firstSeq <= 30, `records before ${firstSeq} are gone`)
  const opens = countSegmentOpens(t)
  const got = await c.fetch(5, 0)
  t.same(got.lost, { fromSeq: 11, toSeq: firstSeq - 1, count: firstSeq - 11 })
  t.same(seqsOf(got.records), [firstSeq, firstSeq + 1, firstSeq + 2, firstSeq + 3, firstSeq + 4])
  t.same(seqsOf(await log.read({ fromSeq: 11 }, 2)), [firstSeq, firstSeq + 1], 'a read starts at the first record held')
  t.equal(opens.count, 0, 'the records still held came from memory')
})

t.test('a record is in no read before its append resolves (fsync always)', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await log.append('first', bytes('first'))
  const c = await log.consumer('early', { startSeq: 2 })
  // Hold every fdatasync until released: the append's record is written, not yet durable.
  const probe = await fsOpen(join(dir, 'probe'), 'w')
  const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const realSync = proto.datasync
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  proto.datasync = async function (this: FileHandle) {
    await gate
    return realSync.call(this)
  }
  t.teardown(() => {
    proto.datasync = realSync
    release()
  })
  let resolved = false
  const appending = log.append('second', bytes('second')).then((r) => {
    resolved = true
    return r
  })
  await new Promise((r) => setTimeout(r, 30))
  t.equal(resolved, false, 'the append waits for its sync')
  t.same(await c.fetch(10, 0), { records: [], lost: null }, 'a consumer does not see it')
  t.same(seqsOf(await log.read({ fromSeq: 2 }, 10)), [], 'nor does a read')
  release()
  t.same(await appending, { seq: 2, duplicate: false })
  t.same(seqsOf((await c.fetch(10, 0)).records), [2], 'once durable it is served')
})

t.test('the ring can be turned off: every read goes to the files', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ tailCacheRecords: 0 })
  t.equal(new TailRing(0, 0, 100).hold(1, 1, 'x', '', bytes('x')).data.byteLength, 1)
  const noBytes = new TailRing(0, 0, 100)
  noBytes.push(noBytes.hold(1, 1, 'x', '', bytes('x')))
  t.equal(noBytes.records, 0, 'no bytes is off too')
  await appendN(log, 1, 3)
  const c = await log.consumer('files')
  const opens = countSegmentOpens(t)
  t.same(seqsOf((await c.fetch(10, 0)).records), [1, 2, 3])
  t.ok(opens.count > 0)
  opens.reset()
  t.same(await c.fetch(10, 0), { records: [], lost: null })
  t.equal(opens.count, 0, 'a fetch at the end reads nothing, as before')
})

t.test('invalid tail options are refused with invalid_argument', async (t) => {
  const { open } = await journalDir(t)
  for (const bad of [{ tailCacheBytes: -1 }, { tailCacheBytes: 1.5 }, { tailCacheRecords: -1 }, { tailCacheRecords: 2_000_000 }]) {
    await t.rejects(open(bad), { code: 'invalid_argument' }, JSON.stringify(bad))
  }
})

t.test('the ring keeps within its bounds, oldest out first, and holds one run of seqs', async (t) => {
  const maker = new TailRing(0, 1 << 20, 1)
  const rec = (seq: number, size: number, sourceId = 's'): LogRecord => maker.hold(seq, seq * 10, `id-${seq}`, sourceId, new Uint8Array(size).fill(seq))
  const byCount = new TailRing(0, 1 << 20, 4)
  for (let seq = 1; seq <= 10; seq++) byCount.push(rec(seq, 100))
  t.equal(byCount.records, 4)
  t.equal(byCount.firstSeq, 7)
  t.same(seqsOf(byCount.read(7, 10)!), [7, 8, 9, 10])
  t.same(seqsOf(byCount.read(9, 1)!), [9])
  t.equal(byCount.read(6, 10), undefined, 'before the ring: the files')
  t.same(byCount.read(11, 10), [], 'past the end: nothing yet')

  const byBytes = new TailRing(0, 4000, 100)
  for (let seq = 1; seq <= 20; seq++) byBytes.push(rec(seq, 1000))
  t.ok(byBytes.bytes <= 4000, `${byBytes.bytes} bytes held`)
  t.equal(byBytes.records, 3, 'three records of about 1.2 KB in 4,000 bytes')
  t.same(seqsOf(byBytes.read(18, 10)!), [18, 19, 20])
  byBytes.push(rec(21, 5000))
  t.equal(byBytes.records, 0, 'a record larger than the bound is not held, nor anything before it')
  t.equal(byBytes.read(21, 1), undefined, 'it is read from the files')
  t.same(byBytes.read(22, 1), [])
  byBytes.push(rec(22, 10))
  t.same(seqsOf(byBytes.read(22, 5)!), [22])

  const gap = new TailRing(4, 1 << 20, 8)
  gap.push(rec(5, 10))
  gap.push(rec(9, 10))
  t.equal(gap.firstSeq, 9, 'a jump in seqs starts the ring over')
  t.equal(gap.read(5, 10), undefined)

  const appended = new Uint8Array([1, 1, 1])
  const held = [maker.hold(1, 10, 'id-1', 'a', appended), rec(2, 4, 'b'), rec(3, 5, 'a'), rec(4, 20_000, 'a')]
  appended.fill(7)
  t.same(held[0]!.data, new Uint8Array([1, 1, 1]), 'the ring holds its own copy of the appended data')
  const copies = copiesOf(held, null)
  t.same(copies, held, 'copies have the held records\' fields and bytes')
  for (const c of copies) c.data.fill(99)
  t.same(held.map((r) => r.data[0]), [1, 2, 3, 4], 'and share no bytes with them')
  const forA = copiesOf(held, 'a')
  t.equal(forA[1], held[1], 'another source\'s record is looked at, not copied')
  t.not(forA[0], held[0])
  t.same(forA.map((r) => r.data.byteLength), [3, 4, 5, 20_000])
})
