import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openJournal } from '../../pipeline/log-journal.js'
import { findSignal, LOOKUP_MAX_RECORDS } from '../../pipeline/ingest/signal-lookup.js'
import { signalDedupId } from '../../pipeline/ingest/signal-record.js'

// A real journal (fsync never: what is tested is the look-up, not durability).
async function journal(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'lookup-test-'))
  const log = await openJournal({ dir, fsync: 'never', dedupWindowMs: 0 })
  t.teardown(async () => {
    await log.close()
    await rm(dir, { recursive: true, force: true })
  })
  return log
}

const record = (signalId: string, receivedAt: number) => Buffer.from(JSON.stringify({ v: 1, source_id: 'src_a', signal_id: signalId, received_at: new Date(receivedAt).toISOString() }))

t.test('a signal is found by its received_at among the records stored after it, and only under its own source', async (t) => {
  const log = await journal(t)
  const before = Date.now()
  for (let i = 0; i < 3000; i++) await log.append(signalDedupId('src_a', `sig_other_${i}`), record(`sig_other_${i}`, before))
  const wanted = await log.append(signalDedupId('src_a', 'sig_wanted_1'), record('sig_wanted_1', before))
  const found = await findSignal(log, 'src_a', 'sig_wanted_1', before, 60_000)
  t.ok(found.found)
  if (found.found) {
    t.equal(found.seq, wanted.seq)
    t.equal(found.record.signal_id, 'sig_wanted_1')
  }
  t.same(await findSignal(log, 'src_b', 'sig_wanted_1', before, 60_000), { found: false, reason: 'absent' }, 'another source is another dedup id')
  t.same(await findSignal(log, 'src_a', 'sig_missing_1', before, 60_000), { found: false, reason: 'absent' }, 'the end of the log ends the search')
})

t.test('the search stops at records stored later than the longest lag, and reads a bounded number of records', async (t) => {
  const log = await journal(t)
  const start = Date.now()
  for (let i = 0; i < LOOKUP_MAX_RECORDS + 10; i++) await log.append(signalDedupId('src_a', `sig_other_${i}`), record(`sig_other_${i}`, start))
  await log.append(signalDedupId('src_a', 'sig_wanted_1'), record('sig_wanted_1', start))
  t.same(await findSignal(log, 'src_a', 'sig_wanted_1', start, 60_000), { found: false, reason: 'too_far' }, `not past ${LOOKUP_MAX_RECORDS} records`)
  // Stopping at the first record past the lag, it never reaches the bound (too_far).
  t.same(await findSignal(log, 'src_a', 'sig_wanted_1', start - 600_000, 1000), { found: false, reason: 'absent' }, 'a record stored far later than that received_at is not read')
})

t.test('the look-ups of one request share one budget of records', async (t) => {
  const log = await journal(t)
  const start = Date.now()
  for (let i = 0; i < 3000; i++) await log.append(signalDedupId('src_a', `sig_other_${i}`), record(`sig_other_${i}`, start))
  await log.append(signalDedupId('src_a', 'sig_wanted_1'), record('sig_wanted_1', start))
  const budget = { records: 4000 }
  t.same(await findSignal(log, 'src_a', 'sig_missing_1', start, 60_000, budget), { found: false, reason: 'absent' })
  t.equal(budget.records, 4000 - 3001, 'the first took what it read')
  t.same(await findSignal(log, 'src_a', 'sig_wanted_1', start, 60_000, budget), { found: false, reason: 'too_far' }, 'the second has too little left to reach its record')
})
