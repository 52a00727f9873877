import { spawnSync } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import t from 'tap'
import { repoPath } from '../helpers/repo-root.js'

// Runs in its own process under `prlimit --nofile` (util-linux, installed by .ci/run): the
// descriptors are used up there, not in the test runner.
const CHILD = `
import { open, readdir } from 'node:fs/promises'
import { openJournal } from ${JSON.stringify(pathToFileURL(repoPath('dist/pipeline/log-journal.js')).href)}
const dir = process.argv[2]
const warnings = []
const log = await openJournal({ dir, fsync: 'always', dedupWindowMs: 60_000, segmentBytes: 4096, onWarning: (m) => warnings.push(m) })
const record = (i) => Buffer.alloc(500, i % 256)
const segments = async () => (await readdir(dir)).filter((n) => n.endsWith('.seg')).length
let seq = 0
for (; seq < 6; seq++) await log.append('id-' + seq, record(seq))
const before = await segments()
// Every descriptor taken, as a flood of connections takes them.
const held = []
for (;;) {
  try { held.push(await open('/dev/null', 'r')) } catch (err) { if (err.code !== 'EMFILE') throw err; break }
}
const whileOut = []
for (let i = 0; i < 8; i++, seq++) whileOut.push(await log.append('id-' + seq, record(seq)).then(() => 'ok', (err) => String(err.code ?? err)))
await held.pop().close() // one for the count below
const duringSegments = await segments()
for (const h of held) await h.close()
const after = []
for (let i = 0; i < 10; i++, seq++) after.push(await log.append('id-' + seq, record(seq)).then(() => 'ok', (err) => String(err.code ?? err)))
const read = await log.read({ fromSeq: 1 }, 1000)
await log.close()
// Reopened: recovery reads the segment that grew past its size like any other.
const reopened = await openJournal({ dir, fsync: 'always', dedupWindowMs: 60_000, segmentBytes: 4096 })
const reread = await reopened.read({ fromSeq: 1 }, 1000)
await reopened.close()
console.log(JSON.stringify({ before, whileOut, duringSegments, after, afterSegments: await segments(), read: read.map((r) => r.seq), reread: reread.length, warnings }))
`

t.test('with no file descriptor left, the journal keeps appending to the active segment and rolls once one is free', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-fds-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const script = join(dir, 'child.mjs')
  await writeFile(script, CHILD)
  const run = spawnSync('prlimit', ['--nofile=128:128', process.execPath, script, join(dir, 'journal')], { encoding: 'utf8', timeout: 30_000, env: { PATH: process.env['PATH'] } })
  t.equal(run.status, 0, run.stderr)
  const out = JSON.parse(run.stdout.trim().split('\n').at(-1) as string)
  t.same(out.whileOut, Array(8).fill('ok'), 'every append while out of descriptors is taken')
  t.equal(out.duringSegments, out.before, 'into the active segment: no new file could be opened')
  t.same(out.after, Array(10).fill('ok'), 'and appends go on after')
  t.ok(out.afterSegments > out.before, `a roll once descriptors are free (${out.before} → ${out.afterSegments} segments)`)
  t.same(out.read, Array.from({ length: 24 }, (_, i) => i + 1), 'every record reads back in order')
  t.equal(out.reread, 24, 'and again after a reopen')
  t.equal(out.warnings.length, 1, 'one warning, not one per record')
})
