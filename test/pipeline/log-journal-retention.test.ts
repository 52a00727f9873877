import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { loadConfig } from '../../config/index.js'
import { JOURNAL_DEFAULTS, openJournal } from '../../pipeline/log-journal.js'
import type { Journal, JournalOptions } from '../../pipeline/log-journal.js'
import { segmentFileName } from '../../pipeline/journal/segment-file.js'
import { encodeRecordV1 } from '../fixtures/journal-v1.js'
import type { TapTest } from '../contracts/log-contract.js'

const DAY = 86_400_000
const T0 = Date.UTC(2025, 0, 1)
/** Four of these fill a 4096-byte segment exactly: 31-byte header, 5-byte id, 988 bytes of data. */
const SEGMENT = 4096
const record = (i: number): Uint8Array => new Uint8Array(1024 - 31 - 5).fill(i % 256)
const idOf = (prefix: string, i: number): string => `${prefix}-${String(i).padStart(3, '0')}`

/** A journal folder with a settable clock; everything opened is closed at teardown. */
async function clocked(t: TapTest): Promise<{ dir: string; clock: { now: number }; open: (o?: Partial<JournalOptions>) => Promise<Journal> }> {
  const dir = await mkdtemp(join(tmpdir(), 'journal-retention-'))
  const clock = { now: T0 }
  const opened: Journal[] = []
  t.teardown(async () => {
    for (const log of opened) await log.close()
    await rm(dir, { recursive: true, force: true })
  })
  const open = async (o: Partial<JournalOptions> = {}): Promise<Journal> => {
    const log = await openJournal({ dir, fsync: 'always', dedupWindowMs: 0, segmentBytes: SEGMENT, now: () => clock.now, ...o })
    opened.push(log)
    return log
  }
  return { dir, clock, open }
}

async function appendAt(log: Journal, prefix: string, from: number, to: number): Promise<void> {
  for (let i = from; i <= to; i++) await log.append(idOf(prefix, i), record(i))
}

const segments = async (dir: string): Promise<string[]> => (await readdir(dir)).filter((n) => n.endsWith('.seg')).sort()

t.test('the retention defaults are 7 days and 32 GiB, in the journal and in the service configuration', async (t) => {
  t.equal(JOURNAL_DEFAULTS.maxAgeMs, 7 * DAY)
  t.equal(JOURNAL_DEFAULTS.maxBytes, 32 * 1024 ** 3)
  t.equal(JOURNAL_DEFAULTS.keepNewerThanMs, 0)
  const config = loadConfig({})
  t.equal(config.JOURNAL_RETENTION_MAX_AGE_S * 1000, JOURNAL_DEFAULTS.maxAgeMs)
  t.equal(config.JOURNAL_RETENTION_MAX_BYTES, JOURNAL_DEFAULTS.maxBytes)
})

t.test('a journal opened without retention options removes segments past 7 days, and none younger', async (t) => {
  const { dir, clock, open } = await clocked(t)
  const log = await open()
  await appendAt(log, 'a', 1, 40) // ten full segments at T0
  clock.now = T0 + 2 * DAY
  await appendAt(log, 'b', 41, 44)
  t.equal((await segments(dir)).length, 11)
  clock.now = T0 + 7 * DAY
  t.match(await log.enforceRetention(), { segments: 0 }, 'records exactly 7 days old stay')
  clock.now = T0 + 7 * DAY + 1
  t.same(await log.enforceRetention(), { segments: 10, fromSeq: 1, toSeq: 40, bytes: 10 * SEGMENT })
  t.match(await log.info(), { firstSeq: 41, lastSeq: 44, records: 4 })
  t.same(await segments(dir), [segmentFileName(41)])
  t.same((await log.read({ fromSeq: 1 }, 10)).map((r) => r.seq), [41, 42, 43, 44])
})

t.test('the age of a segment not read since open is bounded by the next one\'s first record: kept longer, never shorter', async (t) => {
  const { clock, open } = await clocked(t)
  const log = await open()
  await appendAt(log, 'a', 1, 40)
  clock.now = T0 + 2 * DAY
  await appendAt(log, 'b', 41, 44)
  await log.close()
  clock.now = T0 + 7 * DAY + 1
  const again = await open()
  // Segments 1 to 9 are followed by a segment that starts at T0; the tenth by one at T0 + 2 days.
  t.match(await again.info(), { firstSeq: 37, lastSeq: 44 }, 'retention ran at open')
  clock.now = T0 + 9 * DAY + 1
  t.match(await again.enforceRetention(), { segments: 1, fromSeq: 37, toSeq: 40 })
})

t.test('past maxBytes the oldest segments go, and no more than needed', async (t) => {
  const { open } = await clocked(t)
  const maxBytes = 5 * SEGMENT
  const log = await open({ maxBytes })
  await appendAt(log, 'a', 1, 40)
  const info = await log.info()
  t.ok(info.bytes <= maxBytes, `holds ${info.bytes} bytes`)
  t.ok(info.bytes > maxBytes - SEGMENT, 'removed only what it had to')
  t.equal(info.lastSeq, 40)
  t.equal(info.records, 40 - info.firstSeq + 1)
})

t.test('keepNewerThanMs holds records back from the size limit until they are that old', async (t) => {
  const { clock, open } = await clocked(t)
  const log = await open({ maxBytes: 5 * SEGMENT, keepNewerThanMs: 60_000 })
  await appendAt(log, 'a', 1, 40)
  t.match(await log.info(), { firstSeq: 1, bytes: 40 * 1024 }, 'all kept: none is a minute old')
  clock.now = T0 + 60_000
  t.match(await log.enforceRetention(), { segments: 5, fromSeq: 1, toSeq: 20 })
  t.equal((await log.info()).firstSeq, 21)
})

t.test('a consumer whose records aged out while the journal was closed is told so at restart', async (t) => {
  const { clock, open } = await clocked(t)
  const log = await open()
  await appendAt(log, 'a', 1, 40)
  const c = await log.consumer('recorder')
  await c.fetch(5, 0)
  await c.ack(5)
  clock.now = T0 + 3 * DAY
  await appendAt(log, 'b', 41, 48)
  await log.close()
  clock.now = T0 + 8 * DAY
  const again = await open()
  const { firstSeq } = await again.info()
  t.ok(firstSeq > 6 && firstSeq <= 41, `the oldest records went (first held ${firstSeq})`)
  const resumed = await again.consumer('recorder')
  const got = await resumed.fetch(100, 0)
  t.same(got.lost, { fromSeq: 6, toSeq: firstSeq - 1, count: firstSeq - 6 })
  t.equal(got.records[0]?.seq, firstSeq)
  t.equal(got.records.at(-1)?.seq, 48)
})

t.test('a consumer sees a record as soon as its append resolves under fsync interval, not at the next sync', async (t) => {
  const { open } = await clocked(t)
  const log = await open({ fsync: 'interval', fsyncIntervalMs: 60_000 })
  const c = await log.consumer('tail')
  const fetching = c.fetch(10, 20_000)
  const started = performance.now()
  await log.append('x-001', record(1))
  t.same((await fetching).records.map((r) => r.seq), [1])
  t.ok(performance.now() - started < 5_000)
  await c.ack(1)
  t.equal(c.position(), 1)
})

t.test('a journal written before records carried a source opens, reads, and takes new records in the same segment', async (t) => {
  const { dir, open } = await clocked(t)
  const { mkdir } = await import('node:fs/promises')
  await mkdir(dir, { recursive: true })
  const old = Buffer.concat([1, 2, 3].map((i) => encodeRecordV1(i, T0 + i, `src_a/old-${i}`, new Uint8Array([i]))))
  await writeFile(join(dir, segmentFileName(1)), old)
  // The positions file as it was then: a plain seq per consumer, no filter.
  await writeFile(join(dir, 'consumers.json'), JSON.stringify({ version: 1, consumers: { recorder: 2 } }))
  const log = await open()
  t.match(await log.info(), { firstSeq: 1, lastSeq: 3 })
  await log.append('src_b/new-4', new Uint8Array([4]), { sourceId: 'src_b' })
  await log.close()
  const again = await open()
  t.same((await again.read({ fromSeq: 1 }, 10)).map((r) => [r.seq, r.dedupId, r.sourceId]), [
    [1, 'src_a/old-1', ''],
    [2, 'src_a/old-2', ''],
    [3, 'src_a/old-3', ''],
    [4, 'src_b/new-4', 'src_b'],
  ])
  t.same(await segments(dir), [segmentFileName(1)])
  t.match(await again.consumerInfo('recorder'), { ackSeq: 2, sourceId: null })
  const c = await again.consumer('recorder')
  t.same((await c.fetch(10, 0)).records.map((r) => r.seq), [3, 4])
})

t.test('a stored position past the end of the log (a journal restored from an older copy) resumes after its last record', async (t) => {
  const { dir, open } = await clocked(t)
  const warnings: string[] = []
  const log = await open({ onWarning: (m) => warnings.push(m) })
  await appendAt(log, 'a', 1, 3)
  await log.close()
  await writeFile(join(dir, 'consumers.json'), JSON.stringify({ version: 2, consumers: { ahead: { ack: 50, source: null } } }))
  const again = await open({ onWarning: (m) => warnings.push(m) })
  const c = await again.consumer('ahead')
  t.equal(c.position(), 3)
  t.match(warnings, [/acknowledged seq 50 but the log ends at 3/])
  await again.append('a-004', record(4))
  t.same((await c.fetch(10, 0)).records.map((r) => r.seq), [4], 'the next record is not skipped')
})

t.test('retention options are checked', async (t) => {
  const { dir } = await clocked(t)
  const base = { dir, fsync: 'always', dedupWindowMs: 0 } as const
  await t.rejects(openJournal({ ...base, maxAgeMs: 0 }), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, maxBytes: 100, segmentBytes: 4096 }), { code: 'invalid_argument' })
  await t.rejects(openJournal({ ...base, keepNewerThanMs: -1 }), { code: 'invalid_argument' })
  const unlimited = await openJournal({ ...base, maxAgeMs: Number.POSITIVE_INFINITY, maxBytes: Number.POSITIVE_INFINITY })
  await unlimited.close()
  t.pass('Infinity turns a limit off')
})
