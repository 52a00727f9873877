import { appendFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { RetryNotes, type RetryNote } from '../../pipeline/index.js'

async function folder(t: Test) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-retries-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

const PERIOD = 5 * 60 * 1000
const note = (i: number, time: number): RetryNote => ({ source_id: 'src', key_id: 'key', time, nonce: `nonce-${i}` })

async function replayAll(notes: RetryNotes): Promise<RetryNote[]> {
  const out: RetryNote[] = []
  await notes.replay((n) => out.push(n))
  return out
}

t.test('notes recorded are read back after a reopen, in order, also without a close (kill -9 keeps what was written)', async (t) => {
  const dir = await folder(t)
  let now = 10 * PERIOD
  const open = () => RetryNotes.open(dir, { keepMs: 30 * 60 * 1000, now: () => now, onWriteError: (err) => t.fail(String(err)) })
  const notes = await open()
  const bound = { key: 'idem-1', signal_id: 'sig-1', body_sha256: 'ab'.repeat(32), received_at_ms: now - 5, test: false }
  notes.record({ ...note(0, now), bound })
  for (let i = 1; i < 5; i++) notes.record(note(i, now))
  await new Promise((r) => setTimeout(r, 50))
  // No close: as a killed process leaves it.
  const read = await replayAll(await open())
  t.same(read.map((n) => n.nonce), ['nonce-0', 'nonce-1', 'nonce-2', 'nonce-3', 'nonce-4'])
  t.same(read[0]?.bound, bound)
  now += PERIOD
  notes.record(note(5, now))
  await notes.close()
  t.equal((await readdir(dir)).length, 2, 'one file per period')
  t.equal((await replayAll(await open())).length, 6)
})

t.test('files whose period is past keepMs are dropped, at replay and as periods turn', async (t) => {
  const dir = await folder(t)
  let now = 100 * PERIOD
  const keepMs = 2 * PERIOD
  const notes = await RetryNotes.open(dir, { keepMs, now: () => now, onWriteError: (err) => t.fail(String(err)) })
  for (let p = 0; p < 6; p++) {
    notes.record(note(p, now))
    await new Promise((r) => setTimeout(r, 20))
    now += PERIOD
  }
  notes.record(note(6, now))
  await notes.close()
  const kept = (await readdir(dir)).sort()
  t.ok(kept.length <= 4, `at most keepMs and two periods on disk (${kept.join(', ')})`)
  now += 10 * PERIOD
  const later = await RetryNotes.open(dir, { keepMs, now: () => now, onWriteError: (err) => t.fail(String(err)) })
  t.same(await replayAll(later), [], 'nothing left that matters')
  t.same(await readdir(dir), [], 'and nothing left on disk')
})

t.test('a torn or damaged line is skipped; the rest is read', async (t) => {
  const dir = await folder(t)
  const now = 10 * PERIOD
  const file = join(dir, `retries.${now}.jsonl`)
  await writeFile(file, `${JSON.stringify(note(1, now))}\n{"source_id":1}\nnot json\n${JSON.stringify({ ...note(2, now), bound: { key: 'k' } })}\n`)
  await appendFile(file, `${JSON.stringify(note(3, now))}\n{"source_id":"src","ke`)
  const notes = await RetryNotes.open(dir, { keepMs: PERIOD, now: () => now, onWriteError: (err) => t.fail(String(err)) })
  t.same((await replayAll(notes)).map((n) => n.nonce), ['nonce-1', 'nonce-3'])
  notes.record(note(4, now))
  await notes.close()
  const again = await RetryNotes.open(dir, { keepMs: PERIOD, now: () => now, onWriteError: (err) => t.fail(String(err)) })
  t.same((await replayAll(again)).map((n) => n.nonce), ['nonce-1', 'nonce-3', 'nonce-4'], 'a note after the torn line is not lost with it')
})
