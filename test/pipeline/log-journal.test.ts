import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { appendFile, mkdtemp, open as fsOpen, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import { syncBuiltinESMExports } from 'node:module'
import { tmpdir } from 'node:os'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { openJournal } from '../../pipeline/log-journal.js'
import type { Journal, JournalOptions } from '../../pipeline/log-journal.js'
import type { SignalLog } from '../../pipeline/log.js'
import { TailRing } from '../../pipeline/journal/tail-ring.js'
import { payloadFor } from '../fixtures/journal-writer.js'
import { logContract } from '../contracts/log-contract.js'
import type { TapTest } from '../contracts/log-contract.js'

const WINDOW = 20 * 60_000

// Small segments, so that reads cross many of them and retention has whole ones to remove.
logContract(t, 'journal', (dir) => openJournal({ dir, fsync: 'always', dedupWindowMs: WINDOW, segmentBytes: 4096 }), {
  expire: async (log, beforeSeq) => void (await (log as Journal).purge(beforeSeq)),
  // What running out of file descriptors does to the journal: opening a segment to read
  // it, or the consumer positions file to replace it, fails with EMFILE. Reads the memory
  // tail covers need no descriptor, so the hook also sends every read to the files, as
  // for records that have left the tail.
  makeUnavailable: async () => {
    const realOpen = fs.promises.open
    const realRead = TailRing.prototype.read
    fs.promises.open = (async () => {
      throw Object.assign(new Error('EMFILE: too many open files'), { code: 'EMFILE' })
    }) as typeof fs.promises.open
    syncBuiltinESMExports()
    TailRing.prototype.read = () => undefined
    return async () => {
      fs.promises.open = realOpen
      syncBuiltinESMExports()
      TailRing.prototype.read = realRead
    }
  },
})

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const text = (b: Uint8Array): string => new TextDecoder().decode(b)

/** A temp folder removed at teardown, and an opener that closes what it opened. */
async function journalDir(t: TapTest): Promise<{ dir: string; open: (o?: Partial<JournalOptions>) => Promise<SignalLog> }> {
  const dir = await mkdtemp(join(tmpdir(), 'journal-test-'))
  const opened: SignalLog[] = []
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

async function segmentFiles(dir: string): Promise<string[]> {
  return (await readdir(dir)).filter((n) => n.endsWith('.seg')).sort()
}

async function lastSegment(dir: string): Promise<string> {
  return join(dir, (await segmentFiles(dir)).at(-1)!)
}

async function appendN(log: SignalLog, n: number, from = 1): Promise<void> {
  for (let i = from; i < from + n; i++) await log.append(`id-${i}`, bytes(`data ${i}`.padEnd(100, '.')))
}

async function allRecords(log: SignalLog): Promise<{ seq: number; dedupId: string; data: string }[]> {
  return (await log.read({ fromSeq: 1 }, 1_000_000)).map((r) => ({ seq: r.seq, dedupId: r.dedupId, data: text(r.data) }))
}

t.test('garbage after the last record is cut off at open and appends continue from the next seq', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await appendN(log, 40)
  await log.close()
  const seg = await lastSegment(dir)
  const goodSize = (await stat(seg)).size
  await appendFile(seg, Buffer.from('\x00\x01garbage that is not a record, written by a dying process'))
  const again = await open()
  t.equal((await again.info()).lastSeq, 40)
  t.equal((await allRecords(again)).length, 40)
  t.equal((await stat(seg)).size, goodSize, 'the file was truncated to the last good record')
  t.same(await again.append('next', bytes('next')), { seq: 41, duplicate: false })
})

t.test('a half-written final record is cut off at open', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await appendN(log, 40)
  const sizeAt40 = (await log.info()).bytes
  await appendN(log, 1, 41)
  const sizeAt41 = (await log.info()).bytes
  await log.close()
  const seg = await lastSegment(dir)
  await truncate(seg, sizeAt40 + Math.floor((sizeAt41 - sizeAt40) / 2))
  const again = await open()
  t.equal((await again.info()).lastSeq, 40)
  const records = await allRecords(again)
  t.same(records.map((r) => r.seq), Array.from({ length: 40 }, (_, i) => i + 1))
  t.same(await again.append('id-41', bytes('rewritten')), { seq: 41, duplicate: false })
})

t.test('a checksum mismatch in the last segment truncates the log from that record', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await appendN(log, 14)
  const sizeAt14 = (await log.info()).bytes
  await appendN(log, 6, 15)
  await log.close()
  const seg = await lastSegment(dir)
  const file = await readFile(seg)
  // Flip one payload byte of record 15: its framing still parses, its CRC does not.
  file[sizeAt14 + 50]! ^= 0xff
  await writeFile(seg, file)
  const repairs: unknown[] = []
  const again = await open({ onRepair: (tail) => repairs.push(tail) })
  t.equal((await again.info()).lastSeq, 14)
  t.equal((await allRecords(again)).length, 14)
  t.equal((await stat(seg)).size, sizeAt14)
  t.same(await again.append('next', bytes('next')), { seq: 15, duplicate: false })
  t.match(repairs, [{ path: seg, offset: sizeAt14, bytes: file.length - sizeAt14, validRecordsCut: 5 }], 'the cut is reported, with the whole records it held')
})

t.test('a bad record followed by more valid records than one batch is damage, not a torn tail: the open fails and nothing is cut', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await appendN(log, 10)
  const sizeAt10 = (await log.info()).bytes
  // 12 records of 800 KB: more than the 8 MiB batch (and one record) a crash can leave unsynced.
  for (let i = 11; i <= 22; i++) await log.append(`big-${i}`, new Uint8Array(800 * 1024).fill(i))
  await log.close()
  const seg = await lastSegment(dir)
  const file = await readFile(seg)
  file[sizeAt10 + 40]! ^= 0xff
  await writeFile(seg, file)
  await t.rejects(open(), { code: 'log_corrupt', message: /followed by 11 valid records/ })
  t.equal((await stat(seg)).size, file.length, 'nothing was cut')
  // Under 'never' a crash can leave any amount unsynced, so the same bytes are a torn tail.
  const repairs: Array<{ validRecordsCut: number }> = []
  const lenient = await open({ fsync: 'never', onRepair: (tail) => repairs.push(tail) })
  t.equal((await lenient.info()).lastSeq, 10)
  t.equal(repairs[0]?.validRecordsCut, 11)
})

t.test('records roll into new segment files and reads cross segment boundaries', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open({ segmentBytes: 4096 })
  const data = (i: number): Uint8Array => bytes(`rec ${i} `.padEnd(1000, '~'))
  for (let i = 1; i <= 100; i++) await log.append(`s-${i}`, data(i))
  const files = await segmentFiles(dir)
  t.ok(files.length >= 25, `${files.length} segment files`)
  t.equal(files[0], '00000000000000000001.seg')
  for (const name of files) t.ok((await stat(join(dir, name))).size <= 4096, `${name} stays within segmentBytes`)
  const middle = await log.read({ fromSeq: 37 }, 30)
  t.same(middle.map((r) => r.seq), Array.from({ length: 30 }, (_, i) => 37 + i))
  t.ok(middle.every((r) => text(r.data) === text(data(r.seq))))
  const all = await log.read({ fromSeq: 1 }, 1000)
  const fromTime = await log.read({ fromTime: all[62]!.time }, 3)
  t.equal(fromTime[0]?.seq, all.find((r) => r.time >= all[62]!.time)!.seq)
  t.same(await log.read({ fromSeq: 99 }, 10).then((rs) => rs.map((r) => r.seq)), [99, 100])
})

t.test('reads inside sealed segments work after reopen', async (t) => {
  const { open } = await journalDir(t)
  let now = 1_000_000
  const log = await open({ segmentBytes: 4096, now: () => now })
  for (let i = 1; i <= 100; i++) {
    now += 10
    await log.append(`s-${i}`, bytes(`rec ${i} `.padEnd(700, '~')))
  }
  await log.close()
  const again = await open({ segmentBytes: 4096, now: () => now })
  t.same((await again.read({ fromSeq: 23 }, 4)).map((r) => r.seq), [23, 24, 25, 26])
  t.same((await again.read({ fromTime: 1_000_000 + 10 * 51 }, 2)).map((r) => r.seq), [51, 52])
  t.same((await again.read({ fromTime: 1_000_000 + 10 * 51 - 5 }, 1)).map((r) => r.seq), [51])
  t.equal((await allRecords(again)).length, 100)
})

t.test('a reader paging through a sealed segment resumes where its last page stopped, reading nothing past its pages', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open({ segmentBytes: 32 * 1024, dedupWindowMs: 0 })
  for (let i = 1; i <= 100; i++) await log.append(`p-${i}`, bytes(`rec ${i} `.padEnd(600, '~')))
  await log.close()
  // Damage record 40, in the first (sealed) segment: pages before it must not touch it.
  const first = join(dir, (await segmentFiles(dir))[0]!)
  const file = await readFile(first)
  const at = file.indexOf('rec 40 ')
  t.ok(at > 0)
  file[at]! ^= 0xff
  await writeFile(first, file)
  const again = await open({ segmentBytes: 32 * 1024, dedupWindowMs: 0 })
  const seqs: number[] = []
  for (let from = 1; from < 36; from += 5) seqs.push(...(await again.read({ fromSeq: from }, 5)).map((r) => r.seq))
  t.same(seqs, Array.from({ length: 35 }, (_, i) => i + 1), 'seven pages, each starting where the one before stopped')
  await t.rejects(again.read({ fromSeq: 36 }, 5), { code: 'log_corrupt' }, 'the page reaching the damage finds it')
})

t.test('readers taking turns each resume at their own position', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ segmentBytes: 8 * 1024 })
  for (let i = 1; i <= 120; i++) await log.append(`r-${i}`, bytes(`rec ${i}`.padEnd(300, '.')))
  await log.close()
  const again = await open({ segmentBytes: 8 * 1024 })
  const cursors = [1, 20, 41, 77, 90]
  const got: number[][] = cursors.map(() => [])
  for (let round = 0; round < 12; round++) {
    for (let c = 0; c < cursors.length; c++) {
      const page = await again.read({ fromSeq: cursors[c]! }, 3 + c)
      got[c]!.push(...page.map((r) => Number.parseInt(text(r.data).slice(4), 10)))
      if (page.length > 0) cursors[c] = page.at(-1)!.seq + 1
    }
  }
  const starts = [1, 20, 41, 77, 90]
  for (let c = 0; c < starts.length; c++) {
    const want = Array.from({ length: Math.min(12 * (3 + c), 121 - starts[c]!) }, (_, i) => starts[c]! + i)
    t.same(got[c], want, `reader ${c} saw its records in order, none skipped or repeated`)
  }
})

t.test('records close to the 1 MiB limit round-trip, in and across segments', async (t) => {
  const { open } = await journalDir(t)
  const big = (fill: number): Uint8Array => new Uint8Array(1024 * 1024 - 100).fill(fill)
  const log = await open({ segmentBytes: 1024 * 1024 })
  await log.append('small-1', bytes('s1'))
  await log.append('big-1', big(1))
  await log.append('big-2', big(2))
  await log.append('small-2', bytes('s2'))
  await log.close()
  const again = await open({ segmentBytes: 1024 * 1024 })
  const records = await again.read({ fromSeq: 2 }, 10)
  t.same(records.map((r) => r.dedupId), ['big-1', 'big-2', 'small-2'])
  t.ok(Buffer.from(records[0]!.data).equals(Buffer.from(big(1))))
  t.ok(Buffer.from(records[1]!.data).equals(Buffer.from(big(2))))
  t.same((await again.read({ fromSeq: 3 }, 1)).map((r) => r.dedupId), ['big-2'])
})

t.test('a duplicate id is still detected after reopen', async (t) => {
  const { open } = await journalDir(t)
  const log = await open({ segmentBytes: 4096 })
  await appendN(log, 200)
  await log.close()
  const again = await open({ segmentBytes: 4096 })
  t.same(await again.append('id-1', bytes('retry')), { seq: 1, duplicate: true })
  t.same(await again.append('id-200', bytes('retry')), { seq: 200, duplicate: true })
  t.same(await again.append('id-201', bytes('new')), { seq: 201, duplicate: false })
})

t.test('a dedup id is forgotten once the window has passed', async (t) => {
  const { open } = await journalDir(t)
  let now = 5_000_000
  const log = await open({ dedupWindowMs: 1000, now: () => now })
  t.same(await log.append('a', bytes('1')), { seq: 1, duplicate: false })
  now += 999
  t.same(await log.append('a', bytes('2')), { seq: 1, duplicate: true }, 'inside the window')
  now += 1
  t.same(await log.append('a', bytes('3')), { seq: 2, duplicate: false }, 'once the window has passed')
  t.same(await log.append('a', bytes('4')), { seq: 2, duplicate: true }, 'the new record starts a new window')
})

t.test('ids outside the window are not remembered after reopen', async (t) => {
  const { open } = await journalDir(t)
  let now = 5_000_000
  const log = await open({ dedupWindowMs: 1000, now: () => now })
  await log.append('old', bytes('1'))
  now += 600
  await log.append('recent', bytes('2'))
  await log.close()
  now += 500
  const again = await open({ dedupWindowMs: 1000, now: () => now })
  t.same(await again.append('recent', bytes('x')), { seq: 2, duplicate: true })
  t.same(await again.append('old', bytes('x')), { seq: 3, duplicate: false })
})

t.test('reopening scans only the segments inside the dedup window, and a bad older segment fails its reads', async (t) => {
  const { dir, open } = await journalDir(t)
  let now = 1_000_000
  const opts = { segmentBytes: 4096, dedupWindowMs: 60_000, now: () => now }
  const log = await open(opts)
  for (let i = 1; i <= 30; i++) await log.append(`old-${i}`, bytes(`old ${i}`.padEnd(500, '.')))
  now += 3_600_000
  for (let i = 1; i <= 30; i++) await log.append(`new-${i}`, bytes(`new ${i}`.padEnd(500, '.')))
  await log.close()
  // Damage a record in the middle of the oldest segment: open must not need to read it.
  const first = join(dir, (await segmentFiles(dir))[0]!)
  const file = await readFile(first)
  file[file.length - 3]! ^= 0xff
  await writeFile(first, file)
  const again = await open(opts)
  t.same(await again.append('new-30', bytes('x')), { seq: 60, duplicate: true })
  t.same(await again.append('old-1', bytes('x')), { seq: 61, duplicate: false })
  await t.rejects(again.read({ fromSeq: 1 }, 100), { code: 'log_corrupt' })
  t.equal((await again.read({ fromSeq: 31 }, 100)).length, 31)
})

t.test('maxSegments deletes the oldest segments and reads start at the first record held', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open({ segmentBytes: 4096, maxSegments: 3 })
  for (let i = 1; i <= 60; i++) await log.append(`m-${i}`, bytes(`m ${i}`.padEnd(1000, '.')))
  const files = await segmentFiles(dir)
  t.equal(files.length, 3)
  const info = await log.info()
  t.equal(info.lastSeq, 60)
  t.equal(files[0], `${String(info.firstSeq).padStart(20, '0')}.seg`)
  t.equal(info.records, 60 - info.firstSeq + 1)
  const records = await log.read({ fromSeq: 1 }, 100)
  t.equal(records[0]?.seq, info.firstSeq)
  t.equal(records.at(-1)?.seq, 60)
})

t.test('an empty last segment left by a crash during a roll is reused', async (t) => {
  const { dir, open } = await journalDir(t)
  const log = await open()
  await appendN(log, 5)
  await log.close()
  await writeFile(join(dir, '00000000000000000006.seg'), Buffer.alloc(0))
  const again = await open()
  t.match(await again.info(), { firstSeq: 1, lastSeq: 5 })
  t.same(await again.append('six', bytes('6')), { seq: 6, duplicate: false })
  t.same((await allRecords(again)).map((r) => r.seq), [1, 2, 3, 4, 5, 6])
})

t.test('record times never go backwards when the clock does', async (t) => {
  const { open } = await journalDir(t)
  let now = 9_000_000
  const log = await open({ now: () => now })
  await log.append('a', bytes('a'))
  now -= 5000
  await log.append('b', bytes('b'))
  const [a, b] = await log.read({ fromSeq: 1 }, 2)
  t.equal(a?.time, 9_000_000)
  t.equal(b?.time, 9_000_000)
})

t.test('an empty dedup id is never deduplicated', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  t.same(await log.append('', bytes('1')), { seq: 1, duplicate: false })
  t.same(await log.append('', bytes('2')), { seq: 2, duplicate: false })
})

t.test('unknown or invalid options are refused with invalid_argument', async (t) => {
  const { dir } = await journalDir(t)
  const base = { dir, fsync: 'always' as const, dedupWindowMs: 1000 }
  await t.rejects(openJournal({ ...base, fsyncIntervalMS: 5 } as JournalOptions), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, fsync: 'sometimes' } as unknown as JournalOptions), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, segmentBytes: 10 }), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, maxSegments: 0 }), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, dedupWindowMs: -1 }), { code: 'invalid_argument' })
})

t.test('a journal folder cannot be opened twice in one process', async (t) => {
  const { dir, open } = await journalDir(t)
  await open()
  await t.rejects(openJournal({ dir, fsync: 'always', dedupWindowMs: 1000 }), { code: 'invalid_argument' })
})

t.test('a folder freed by close can be opened again', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  await log.close()
  const again = await open()
  t.equal((await again.info()).lastSeq, 0)
})

t.test('sync puts acknowledged appends on disk under the relaxed policies, and costs nothing under always', async (t) => {
  // Counts fdatasync calls on every file handle: the journal's own calls are what is checked.
  const probe = await fsOpen(process.execPath, 'r')
  const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const original = proto.datasync
  let datasyncs = 0
  proto.datasync = function (this: unknown) {
    datasyncs++
    return original.call(this)
  }
  t.teardown(() => void (proto.datasync = original))
  for (const fsync of ['never', 'interval', 'always'] as const) {
    const { open } = await journalDir(t)
    // An interval long enough that its timer never runs during the test.
    const log = await open({ fsync, fsyncIntervalMs: 60_000 })
    await log.append('a', bytes('a'))
    const before = datasyncs
    await log.sync()
    t.equal(datasyncs - before, fsync === 'always' ? 0 : 1, `${fsync}: ${fsync === 'always' ? 'already synced at the append' : 'synced now'}`)
    await log.sync()
    t.equal(datasyncs - before, fsync === 'always' ? 0 : 1, `${fsync}: nothing new, no second sync`)
  }
})

t.test('the interval and never policies keep records across close and reopen', async (t) => {
  for (const fsync of ['interval', 'never'] as const) {
    const { open } = await journalDir(t)
    const log = await open({ fsync, fsyncIntervalMs: 5, segmentBytes: 4096 })
    await Promise.all(Array.from({ length: 50 }, (_, i) => log.append(`p-${i}`, bytes(`p ${i}`.padEnd(300, '.')))))
    await log.close()
    const again = await open({ fsync })
    t.equal((await again.info()).lastSeq, 50, fsync)
    t.equal((await allRecords(again)).length, 50, fsync)
  }
})

t.test('a consumers.json that is not valid fails open with log_corrupt', async (t) => {
  const { dir } = await journalDir(t)
  await writeFile(join(dir, 'consumers.json'), '{"version":1,"consumers":')
  await t.rejects(openJournal({ dir, fsync: 'always', dedupWindowMs: 1000 }), { code: 'log_corrupt' })
})

t.test('a dedup id that is not well-formed Unicode is refused with invalid_argument', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  await t.rejects(log.append('bad\uD800', bytes('x')), { code: 'invalid_argument' })
  await t.rejects(log.append('x'.repeat(1025), bytes('x')), { code: 'invalid_argument' })
})

/**
 * Replaces fs.writeSync, which the journal writes records with (syncBuiltinESMExports
 * makes the replacement reach its named import), while `switch.on` is set. `decide`
 * picks per call: the real write, a failure (ENOSPC), or a short write of half the
 * bytes. Standard output and error (fd 1, 2) are always left alone.
 */
function injectWrite(t: TapTest, decide: (fd: number) => 'real' | 'fail' | 'short'): { on: boolean } {
  const realWrite = fs.writeSync as (...a: unknown[]) => number
  const control = { on: false }
  const injected = function (this: unknown, ...args: unknown[]): number {
    const fd = args[0] as number
    const action = control.on && fd > 2 ? decide(fd) : 'real'
    if (action === 'fail') throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
    if (action === 'short') {
      const [, buf, offset, length, position] = args as [number, Uint8Array, number, number, number]
      return realWrite.call(this, fd, buf, offset, Math.max(1, Math.floor(length / 2)), position)
    }
    return realWrite.apply(this, args)
  }
  fs.writeSync = injected as typeof fs.writeSync
  syncBuiltinESMExports()
  t.teardown(() => {
    fs.writeSync = realWrite as typeof fs.writeSync
    syncBuiltinESMExports()
  })
  return control
}

t.test('after a failed write every append rejects with log_io until the journal is reopened', async (t) => {
  const { open } = await journalDir(t)
  const failNext = injectWrite(t, (fd) => (fd > 2 ? 'fail' : 'real'))
  const log = await open()
  await appendN(log, 3)
  failNext.on = true
  const err = await log.append('id-4', bytes('x')).catch((e: unknown) => e)
  failNext.on = false
  t.match(err, { code: 'log_io', name: 'LogError' })
  t.match((err as Error).cause, { code: 'ENOSPC' })
  await t.rejects(log.append('id-5', bytes('x')), { code: 'log_io' }, 'the writer stays failed')
  await t.rejects(log.append('id-4', bytes('x')), { code: 'log_io' }, 'a retry of the failed id is not answered as a duplicate')
  await log.close()
  const again = await open()
  t.equal((await again.info()).lastSeq, 3)
  t.same(await again.append('id-4', bytes('x')), { seq: 4, duplicate: false })
})

t.test('a short write(2) is completed, not taken for the whole record', async (t) => {
  const { open } = await journalDir(t)
  const shortWrites = injectWrite(t, () => 'short')
  const log = await open()
  shortWrites.on = true
  const results = await Promise.all([1, 2, 3].map((i) => log.append(`id-${i}`, bytes(`payload ${i} `.repeat(50)))))
  shortWrites.on = false
  t.same(results.map((r) => r.seq), [1, 2, 3])
  await log.close()
  const again = await open()
  const records = await again.read({ fromSeq: 1 }, 10)
  t.same(records.map((r) => Buffer.from(r.data).toString()), [1, 2, 3].map((i) => `payload ${i} `.repeat(50)))
})

t.test('every acknowledged append survives kill -9 of the writing process', async (t) => {
  const { dir, open } = await journalDir(t)
  const fixture = fileURLToPath(new URL(`../fixtures/journal-writer${extname(import.meta.url)}`, import.meta.url))
  // The fixture as this file runs (TypeScript with its loader in execArgv, or compiled); tap's process-info hook is left out.
  const execArgv = process.execArgv.filter((a) => !a.includes('processinfo'))
  const child = spawn(process.execPath, [...execArgv, fixture, dir], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_OPTIONS: '' },
  })
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  const acked = new Map<number, string>()
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => { stderr += c.toString() })
  await new Promise<void>((resolve, reject) => {
    let buffered = ''
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      const lines = buffered.split('\n')
      buffered = lines.pop()!
      for (const line of lines) {
        const [seq, id] = line.split(' ')
        if (id !== undefined) acked.set(Number(seq), id)
      }
      // Kill mid-burst, with appends in flight, once the log has rolled a few times.
      if (acked.size >= 3000 && child.signalCode === null) {
        child.kill('SIGKILL')
        resolve()
      }
    })
    child.once('exit', () => reject(new Error(`writer exited before the kill: ${stderr}`)))
  })
  t.equal(await exited, 'SIGKILL')
  const log = await open()
  const records = await log.read({ fromSeq: 1 }, 1_000_000)
  t.same(records.map((r) => r.seq), Array.from({ length: records.length }, (_, i) => i + 1), 'seqs are gapless from 1')
  t.equal((await log.info()).lastSeq, records.length)
  const bySeq = new Map(records.map((r) => [r.seq, r]))
  let missing = 0
  let wrong = 0
  for (const [seq, id] of acked) {
    const r = bySeq.get(seq)
    if (r === undefined) missing++
    else if (r.dedupId !== id || Buffer.compare(Buffer.from(r.data), Buffer.from(payloadFor(id))) !== 0) wrong++
  }
  t.equal(missing, 0, `all ${acked.size} acknowledged seqs are readable (log holds ${records.length})`)
  t.equal(wrong, 0, 'each acknowledged seq holds the data that was appended')
  t.ok((await segmentFiles(dir)).length > 1, 'the writer rolled segments')
  t.same(await log.append('after-crash', bytes('x')), { seq: records.length + 1, duplicate: false })
})

t.test('group commit batches concurrent 1 KB appends under fsync always', async (t) => {
  const { open } = await journalDir(t)
  const log = await open()
  const data = new Uint8Array(1024).fill(0x61)
  const total = 40_000
  const concurrency = 1000
  let next = 0
  const started = performance.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < total) {
      const i = next++
      await log.append(`tp-${i}`, data)
    }
  }))
  const seconds = (performance.now() - started) / 1000
  t.equal((await log.info()).lastSeq, total)
  t.comment(`journal throughput: ${Math.round(total / seconds)} appends/s, 1 KiB records, fsync always, ${concurrency} in flight, ${total} appends`)
})
