import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises'
import { readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { DataDirLockedError, LOCK_FILE, lockDataDir } from '../../service/data-dir-lock.js'

async function folder(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-lock-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

const bootId = () => readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()

t.test('a second lock on a held folder is refused, naming the holder; release frees it', async (t) => {
  const dir = await folder(t)
  const lock = await lockDataDir(dir)
  await t.rejects(lockDataDir(dir), new DataDirLockedError(join(dir, LOCK_FILE), process.pid))
  await lock.release()
  await t.rejects(stat(join(dir, LOCK_FILE)), { code: 'ENOENT' }, 'release removes the file')
  const again = await lockDataDir(dir)
  await again.release()
})

t.test('the lock of a process that is gone (kill -9) is stale and taken over', async (t) => {
  const dir = await folder(t)
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60000)'])
  const childPid = child.pid!
  const ticks = readFileSync(`/proc/${childPid}/stat`, 'utf8')
  const startTicks = ticks.slice(ticks.lastIndexOf(')') + 2).split(' ')[19]!
  await writeFile(join(dir, LOCK_FILE), JSON.stringify({ pid: childPid, boot_id: bootId(), start_ticks: startTicks }))
  await t.rejects(lockDataDir(dir), { code: 'data_dir_locked' }, 'held while the holder lives')
  child.kill('SIGKILL')
  await new Promise((r) => child.once('exit', r))
  const lock = await lockDataDir(dir)
  t.match(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8')), { pid: process.pid }, 'taken over')
  await lock.release()
})

t.test('a holder that exited but is not reaped yet (a zombie, as after kill -9 under a lazy init) holds nothing', async (t) => {
  const dir = await folder(t)
  // bash forks a short sleep and becomes a long one that never waits for it: once the
  // short one ends it stays a zombie until the long one exits.
  const parent = spawn('bash', ['-c', 'sleep 0.05 & echo $!; exec sleep 30'])
  t.teardown(() => parent.kill('SIGKILL'))
  const zombiePid = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString()))))
  const stat = () => {
    const text = readFileSync(`/proc/${zombiePid}/stat`, 'utf8')
    return text.slice(text.lastIndexOf(')') + 2).split(' ')
  }
  const startTicks = stat()[19]!
  await writeFile(join(dir, LOCK_FILE), JSON.stringify({ pid: zombiePid, boot_id: bootId(), start_ticks: startTicks }))
  while (stat()[0] !== 'Z') await new Promise((r) => setTimeout(r, 20))
  const lock = await lockDataDir(dir)
  t.match(JSON.parse(await readFile(join(dir, LOCK_FILE), 'utf8')), { pid: process.pid }, 'taken over from the zombie')
  await lock.release()
})

t.test('a live pid that started at another time (pid reused), or another boot, is not the holder', async (t) => {
  const dir = await folder(t)
  for (const holder of [
    { pid: process.pid, boot_id: bootId(), start_ticks: '1' },
    { pid: process.pid, boot_id: 'another-boot', start_ticks: '1' },
  ]) {
    await writeFile(join(dir, LOCK_FILE), JSON.stringify(holder))
    const lock = await lockDataDir(dir)
    await lock.release()
  }
})

t.test('an empty lock file is a start under way while fresh, and a crashed start once old', async (t) => {
  const dir = await folder(t)
  const path = join(dir, LOCK_FILE)
  await writeFile(path, '')
  await t.rejects(lockDataDir(dir), { code: 'data_dir_locked' })
  const old = new Date(Date.now() - 60_000)
  await utimes(path, old, old)
  const lock = await lockDataDir(dir)
  await lock.release()
})
