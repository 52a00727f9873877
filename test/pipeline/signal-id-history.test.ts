import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openJournal, SignalIdHistory, type SignalLog } from '../../pipeline/index.js'
import { FingerprintSet } from '../../pipeline/ingest/embedded/fingerprint-set.js'

/** 80 remembered at most: generations of 10, of which the newest 7 are sealed and kept. */
const MAX = 80
const id = (i: number) => `src_a/signal-${String(i).padStart(6, '0')}`

async function fixture(t: Test) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-history-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const log = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const historyDir = join(dir, 'signal-ids')
  const warnings: string[] = []
  /** Records the history read back from the log since the last open. */
  const readBack = { count: 0 }
  const countingLog: SignalLog = {
    ...log,
    info: () => log.info(),
    read: async (start, max) => {
      const records = await log.read(start, max)
      readBack.count += records.length
      return records
    },
  }
  const open = (over: SignalLog = countingLog) => {
    readBack.count = 0
    return SignalIdHistory.open({ dir: historyDir, maxEntries: MAX, log: over, onWarning: (m) => warnings.push(m) })
  }
  /** Appends signals `from` to `to` (exclusive) to the log and to `history`, as the pipeline does. */
  const accept = async (history: SignalIdHistory, from: number, to: number) => {
    for (let i = from; i < to; i++) history.add(history.fingerprint(id(i)), (await log.append(id(i), Buffer.from('{}'))).seq)
  }
  const files = async () => (await readdir(historyDir)).filter((n) => n.startsWith('gen-')).sort()
  /** Another log, as a power cut could leave one: signals 0 to `kept` (exclusive), then `others`. */
  const cutLog = async (kept: number, others: string[] = []) => {
    const other = await openJournal({ dir: join(dir, 'journal-2'), fsync: 'never', dedupWindowMs: 0 })
    t.teardown(() => other.close())
    for (let i = 0; i < kept; i++) await other.append(id(i), Buffer.from('{}'))
    for (const dedupId of others) await other.append(dedupId, Buffer.from('{}'))
    return other
  }
  return { log: log as SignalLog, historyDir, warnings, readBack, open, accept, files, cutLog }
}

/** Which of signals 0 to `n` the history says it has seen. */
const seen = (history: SignalIdHistory, n: number) => Array.from({ length: n }, (_, i) => i).filter((i) => history.has(history.fingerprint(id(i))))
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i)

t.test('the history remembers the newest signal ids up to its bound, dropping the oldest generation whole', async (t) => {
  const { open, accept, files } = await fixture(t)
  const history = await open()
  await accept(history, 0, 100)
  t.same(seen(history, 100), range(30, 100), 'generations of 10: the newest 70 of 100 (7 sealed generations)')
  t.notOk(history.has(history.fingerprint('src_b/signal-000050')), 'the same signal id of another source is another signal')
  await history.close()
  t.equal((await files()).length, 7, 'one file a sealed generation; dropped ones deleted')
})

t.test('after a restart the sealed generations come from their files and the one under way from the log', async (t) => {
  const { open, accept, files } = await fixture(t)
  const first = await open()
  await accept(first, 0, 75)
  await first.close()
  t.equal((await files()).length, 7)
  const second = await open()
  t.same(seen(second, 75), range(0, 75), 'all 75: 70 from files, 5 read back from the log')
  await accept(second, 75, 85)
  t.same(seen(second, 85), range(10, 85), 'and it goes on dropping the oldest generation')
  await second.close()
})

t.test('a damaged or missing generation file is read back from the log, so no id the log holds is forgotten', async (t) => {
  const { open, accept, files, historyDir, warnings, readBack } = await fixture(t)
  const first = await open()
  await accept(first, 0, 70)
  await first.close()
  const names = await files()
  await writeFile(join(historyDir, names[3]!), 'not a generation')
  await unlink(join(historyDir, names[5]!))
  const second = await open()
  t.same(seen(second, 70), range(0, 70), 'all 70: five generations from their files, two from the log')
  t.equal(readBack.count, 20, 'only the two missing generations were read')
  t.match(warnings, [/damaged/])
  await second.close()
  t.same(await files(), names, 'both were written again')
  const third = await open()
  t.equal(readBack.count, 0)
  t.same(seen(third, 70), range(0, 70))
  await third.close()
})

t.test('a generation file reaching past the end of the log is dropped: a power cut took back signals it names', async (t) => {
  const { open, accept, files, warnings, cutLog } = await fixture(t)
  const first = await open()
  await accept(first, 0, 30)
  await first.close()
  // The log as a power cut under fsync never could leave it: 25 of the 30, then 5 other signals at the same seqs.
  const shorter = await cutLog(25)
  const second = await open(shorter)
  t.match(warnings, [/gen-21-30\.bin reaches past the end of the signal log/])
  t.same(seen(second, 30), range(0, 25), 'the five the log lost are not taken for used')
  for (let i = 0; i < 5; i++) second.add(second.fingerprint(`src_a/other-${i}`), (await shorter.append(`src_a/other-${i}`, Buffer.from('{}'))).seq)
  await second.close()
  t.same((await files()).length, 3, 'the last generation is sealed again from what the log now holds')
  const third = await open(shorter)
  for (let i = 0; i < 5; i++) t.ok(third.has(third.fingerprint(`src_a/other-${i}`)), `other-${i}, at a seq the dropped file named, is remembered`)
  t.same(seen(third, 30), range(0, 25))
  await third.close()
})

t.test('without its secret the history starts again from the log, as far back as it reaches', async (t) => {
  const { open, accept, historyDir, files } = await fixture(t)
  const first = await open()
  await accept(first, 0, 100)
  await first.close()
  await unlink(join(historyDir, 'secret'))
  const second = await open()
  // The last 80 records of the log are read back; sealing the eighth generation of them drops the first.
  t.same(seen(second, 100), range(30, 100))
  await second.close()
  const third = await open()
  t.same(seen(third, 100), range(30, 100), 'the files it wrote are read back under the new secret')
  t.equal((await files()).length, 7)
})

t.test('the generation under way comes back from its tail file: a restart reads from the log only what the tail misses', async (t) => {
  const { log, open, accept, readBack, historyDir } = await fixture(t)
  const first = await open()
  await accept(first, 0, 75)
  await first.close()
  const second = await open()
  t.equal(readBack.count, 1, 'seven sealed files and the tail cover all 75: only the record the tail ends at is read, to check it')
  t.same(seen(second, 75), range(0, 75))
  // Accepted after the last tail write, as a crash would leave them: only the log has them.
  await accept(second, 75, 77)
  for (let i = 77; i < 79; i++) await log.append(id(i), Buffer.from('{}'))
  await second.close()
  const third = await open()
  t.equal(readBack.count, 1 + 2, 'the two the tail missed are read back from the log, and only they')
  t.same(seen(third, 79), range(0, 79))
  await accept(third, 79, 80)
  t.same(seen(third, 80), range(10, 80), 'the generation the tail restored is sealed once full')
  await third.close()
  await t.rejects(stat(join(historyDir, 'tail.bin')), { code: 'ENOENT' }, 'a sealed generation takes its tail with it')
})

t.test('a damaged tail is used up to the damage and the rest comes from the log', async (t) => {
  const { open, accept, readBack, historyDir } = await fixture(t)
  const first = await open()
  await accept(first, 0, 73)
  await first.close()
  const second = await open()
  await accept(second, 73, 76)
  await second.close()
  const tail = join(historyDir, 'tail.bin')
  const bytes = await readFile(tail)
  // Two frames: seqs 71 to 73, then 74 to 76. Flip a fingerprint bit in the second.
  bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 1
  await writeFile(tail, bytes)
  const third = await open()
  t.equal(readBack.count, 1 + 3, 'the frame that fails its checksum is read back from the log')
  t.same(seen(third, 76), range(0, 76))
  await third.close()
  const fourth = await open()
  t.equal(readBack.count, 1, 'the damaged frame was cut and replaced by a good one')
  t.same(seen(fourth, 76), range(0, 76))
  await fourth.close()
  await appendFile(tail, Buffer.from('torn frame'))
  const fifth = await open()
  t.equal(readBack.count, 1, 'torn bytes after the last frame cost nothing')
  t.same(seen(fifth, 76), range(0, 76))
  await fifth.close()
})

t.test('a tail frame past the end of the log is not trusted, since the log no longer holds that signal', async (t) => {
  const { open, accept, readBack, cutLog } = await fixture(t)
  const first = await open()
  await accept(first, 0, 73)
  await first.close()
  const second = await open()
  await accept(second, 73, 75)
  await second.close()
  // A log cut back to 74 records, its 74th a different signal than the tail remembers.
  const shorter = await cutLog(73, ['src_a/other-signal'])
  const third = await open(shorter)
  t.same(seen(third, 75), range(0, 73), 'signals 73 and 74 are forgotten with the frame that named them')
  t.ok(third.has(third.fingerprint('src_a/other-signal')), 'the log record at their place is read back instead')
  t.equal(readBack.count, 0, 'the uncounted log was the one read')
  await third.close()
})

t.test('a tail whose last frame names another signal than the log holds at that seq is not trusted', async (t) => {
  const { open, accept, cutLog } = await fixture(t)
  const first = await open()
  await accept(first, 0, 73)
  await first.close()
  // The same seqs, but the 73rd is another signal: a log that lost its end and was refilled.
  const refilled = await cutLog(72, ['src_a/other-signal'])
  const second = await open(refilled)
  t.same(seen(second, 73), range(0, 72), 'signal 72, which the log no longer holds, is not taken for used')
  t.ok(second.has(second.fingerprint('src_a/other-signal')), 'the signal now at its seq is remembered')
  await second.close()
})

t.test('an add that skips a seq ends the tail, and a restart reads what it lacks from the log', async (t) => {
  const { log, open, accept, readBack } = await fixture(t)
  const first = await open()
  await accept(first, 0, 72)
  await first.close()
  const second = await open()
  // Seqs 73 to 75 in the log; the history is told of 73 and 75 only.
  const seqs: number[] = []
  for (let i = 72; i < 75; i++) seqs.push((await log.append(id(i), Buffer.from('{}'))).seq)
  second.add(second.fingerprint(id(72)), seqs[0]!)
  second.add(second.fingerprint(id(74)), seqs[2]!)
  await second.close()
  const third = await open()
  t.same(seen(third, 75), range(0, 75), 'signal 73, which the history was never told of, is remembered: the log has it')
  t.equal(readBack.count, 1 + 3, 'the tail ends before the skip; the three from there are read from the log')
  await third.close()
})

t.test('a tail that cannot be read is only a cache: a warning, and its generation comes from the log', async (t) => {
  const { open, accept, historyDir, warnings, readBack } = await fixture(t)
  const first = await open()
  await accept(first, 0, 73)
  await first.close()
  await rm(join(historyDir, 'tail.bin'))
  await mkdir(join(historyDir, 'tail.bin'))
  const second = await open()
  t.same(seen(second, 73), range(0, 73))
  t.equal(readBack.count, 3)
  t.match(warnings, [/could not read the signal-id history tail/])
  await second.close()
  t.ok((await stat(join(historyDir, 'tail.bin'))).isFile(), 'a tail file is written in its place')
})

t.test('a fingerprint set holds what was added, and survives its pairs', async (t) => {
  const set = new FingerprintSet()
  for (let i = 1; i <= 50_000; i++) set.add(i * 2654435761, i)
  t.equal(set.size, 50_000)
  t.notOk(set.add(2654435761, 1), 'adding twice adds nothing')
  const copy = FingerprintSet.fromPairs(set.toPairs())
  t.equal(copy.size, 50_000)
  let missing = 0
  for (let i = 1; i <= 50_000; i++) if (!copy.has((i * 2654435761) >>> 0, i)) missing++
  t.equal(missing, 0)
  t.notOk(copy.has(1, 50_001))
})
