import { spawn } from 'node:child_process'
import fs from 'node:fs'
import { appendFile, copyFile, mkdtemp, open as fsOpen, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { syncBuiltinESMExports } from 'node:module'
import { tmpdir } from 'node:os'
import { extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { fileKvBuckets, type KvBucketLimits } from '../../storage/index.js'
import { valueFor } from '../fixtures/kv-writer.js'
import { kvContract, type TapTest } from '../contracts/kv-contract.js'

kvContract(t, 'file', (dir, name, limits) => fileKvBuckets({ dir })(name, limits))

const LIMITS: KvBucketLimits = { maxKeys: 10_000, maxValueBytes: 64 * 1024 }
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const text = (b: Uint8Array): string => new TextDecoder().decode(b)

async function folder(t: TapTest) {
  const dir = await mkdtemp(join(tmpdir(), 'kv-file-'))
  const warnings: string[] = []
  const open = () => fileKvBuckets({ dir, onWarning: (m) => warnings.push(m) })('b', LIMITS)
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return { dir, open, warnings, log: join(dir, 'b', 'changes.kv'), snapshot: join(dir, 'b', 'snapshot.kv') }
}

t.test('a torn last frame is cut off on open, and writing goes on after it', async (t) => {
  const f = await folder(t)
  let bucket = await f.open()
  await bucket.create('a', bytes('one'))
  await bucket.create('b', bytes('two'))
  await bucket.close()
  const whole = (await stat(f.log)).size
  // The first bytes of a frame that a crash cut short: its magic and part of its length.
  await appendFile(f.log, Buffer.from([0x53, 0x4b, 0x56, 0x31, 0x40, 0x00]))
  bucket = await f.open()
  t.equal((await stat(f.log)).size, whole, 'the torn bytes are gone from the file')
  t.match(f.warnings, [/torn tail of 6 bytes/])
  t.equal(text((await bucket.get('b'))!.value), 'two')
  t.equal(await bucket.put('c', bytes('three')), 3)
  await bucket.close()
  bucket = await f.open()
  t.equal(text((await bucket.get('c'))!.value), 'three', 'the write after the repair reads back')
  await bucket.close()
})

t.test('a whole frame whose checksum fails, with none after it, is a torn tail too', async (t) => {
  const f = await folder(t)
  let bucket = await f.open()
  await bucket.create('a', bytes('one'))
  await bucket.create('b', bytes('two'))
  await bucket.close()
  const data = await readFile(f.log)
  data[data.length - 1] = data[data.length - 1]! ^ 0xff
  await writeFile(f.log, data)
  bucket = await f.open()
  t.equal(text((await bucket.get('a'))!.value), 'one')
  t.equal(await bucket.get('b'), null, 'the damaged last write was never acknowledged')
  t.equal(await bucket.put('b', bytes('again')), 2, 'its revision is given out again, never having been seen')
  await bucket.close()
})

t.test('damage with whole frames after it stops the open with corrupt', async (t) => {
  const f = await folder(t)
  const bucket = await f.open()
  await bucket.create('a', bytes('one'))
  await bucket.create('b', bytes('two'))
  await bucket.close()
  const data = await readFile(f.log)
  data[20] = data[20]! ^ 0xff
  await writeFile(f.log, data)
  await t.rejects(f.open(), { code: 'corrupt', transient: false })
  t.equal((await readFile(f.log)).length, data.length, 'nothing was cut')
})

t.test('the change log is compacted into the snapshot once it outgrows it, and both read back', async (t) => {
  const f = await folder(t)
  let bucket = await f.open()
  const value = new Uint8Array(20_000).fill(0x61)
  for (let i = 0; i < 120; i++) await bucket.put(`k${i % 10}`, value)
  t.ok((await stat(f.snapshot)).size > 0, 'a snapshot was written')
  t.ok((await stat(f.log)).size < 1024 * 1024, 'the log was emptied since')
  await bucket.put('last', bytes('x'))
  await bucket.close()
  bucket = await f.open()
  t.same(await bucket.status(), { bucket: 'b', values: 11, revision: 121 })
  t.equal((await bucket.get('k3'))!.value.length, 20_000)
  await bucket.close()
})

t.test('changes a snapshot already holds are skipped when a crash left them in the log', async (t) => {
  const f = await folder(t)
  let bucket = await f.open()
  await bucket.create('a', bytes('old'))
  await bucket.close()
  // The log as it was before the compaction below emptied it.
  await copyFile(f.log, `${f.log}.before`)
  bucket = await f.open()
  await bucket.put('a', bytes('new'))
  await bucket.delete('a')
  await bucket.put('b', bytes('b'))
  // Up to the first compaction, and not a write more.
  let revision = 0
  while ((await stat(f.snapshot).catch(() => undefined)) === undefined) revision = await bucket.put('filler', new Uint8Array(20_000))
  await bucket.close()
  // A crash between the snapshot's rename and the log's truncation: a log holding
  // changes the snapshot covers is still there (here its first part).
  await copyFile(`${f.log}.before`, f.log)
  bucket = await f.open()
  t.equal(await bucket.get('a'), null, 'the old create is not replayed over the later delete')
  t.equal(text((await bucket.get('b'))!.value), 'b')
  t.equal((await bucket.status()).revision, revision)
  t.equal(await bucket.put('c', bytes('c')), revision + 1)
  await bucket.close()
})

t.test('one folder is opened by one bucket at a time', async (t) => {
  const f = await folder(t)
  const bucket = await f.open()
  await t.rejects(f.open(), { code: 'invalid_argument' })
  await bucket.close()
  const again = await f.open()
  await again.close()
})

t.test('a failed write is undone and refused as transient io; the bucket keeps working', async (t) => {
  const f = await folder(t)
  const bucket = await f.open()
  await bucket.create('a', bytes('one'))
  const size = (await stat(f.log)).size
  const realWrite = fs.writeSync
  fs.writeSync = (() => {
    throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' })
  }) as typeof fs.writeSync
  syncBuiltinESMExports()
  try {
    await t.rejects(bucket.put('b', bytes('two')), { code: 'io', transient: true })
  } finally {
    fs.writeSync = realWrite
    syncBuiltinESMExports()
  }
  t.equal((await stat(f.log)).size, size, 'nothing of the failed write is left in the file')
  t.equal(await bucket.get('b'), null)
  t.equal(await bucket.put('b', bytes('two')), 2, 'the next write takes the revision the failed one never got')
  await bucket.close()
})

t.test('a failed fdatasync stops the bucket for good and reports it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kv-file-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const failures: string[] = []
  const bucket = await fileKvBuckets({ dir, onFailure: (err) => failures.push(err.code) })('b', LIMITS)
  await bucket.create('a', bytes('one'))
  const probe = await fsOpen(join(dir, 'b', 'changes.kv'), 'r')
  const proto = Object.getPrototypeOf(probe) as { datasync: () => Promise<void> }
  await probe.close()
  const original = proto.datasync
  proto.datasync = () => Promise.reject(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }))
  try {
    await t.rejects(bucket.put('b', bytes('two')), { code: 'io', transient: false })
  } finally {
    proto.datasync = original
  }
  t.same(failures, ['io'])
  await t.rejects(bucket.put('c', bytes('three')), { code: 'io', transient: false }, 'later writes are refused: only a reload knows what is on disk')
  await t.rejects(bucket.get('a'), { code: 'io' })
  await bucket.close()
})

t.test('every acknowledged write survives kill -9 of the writing process, through compactions', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kv-kill-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const fixture = fileURLToPath(new URL(`../fixtures/kv-writer${extname(import.meta.url)}`, import.meta.url))
  // The fixture as this file runs (TypeScript with its loader in execArgv, or compiled); tap's process-info hook is left out.
  const execArgv = process.execArgv.filter((a) => !a.includes('processinfo'))
  const child = spawn(process.execPath, [...execArgv, fixture, dir], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_OPTIONS: '' } })
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.once('exit', (_code, signal) => resolve(signal)))
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  /** The highest acknowledged revision of each key, with the write's number. */
  const acked = new Map<string, { revision: number; n: number }>()
  let count = 0
  let stderr = ''
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()))
  await new Promise<void>((resolve, reject) => {
    let buffered = ''
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      const lines = buffered.split('\n')
      buffered = lines.pop()!
      for (const line of lines) {
        const [key, revision, n] = line.split(' ')
        if (n === undefined) continue
        count++
        const prev = acked.get(key!)
        if (prev === undefined || prev.revision < Number(revision)) acked.set(key!, { revision: Number(revision), n: Number(n) })
      }
      // 4000 writes of about 2 KB: the log is compacted several times before the kill.
      if (count >= 4000 && child.signalCode === null) {
        child.kill('SIGKILL')
        resolve()
      }
    })
    child.once('exit', () => reject(new Error(`writer exited before the kill: ${stderr}`)))
  })
  t.equal(await exited, 'SIGKILL')
  const bucket = await fileKvBuckets({ dir })('writer', { maxKeys: 1000, maxValueBytes: 4096 })
  t.teardown(() => bucket.close())
  let lost = 0
  let wrong = 0
  let top = 0
  for (const [key, { revision, n }] of acked) {
    top = Math.max(top, revision)
    const entry = await bucket.get(key)
    if (entry === null || entry.revision < revision) lost++
    else if (entry.revision === revision && Buffer.compare(Buffer.from(entry.value), Buffer.from(valueFor(key, n))) !== 0) wrong++
  }
  t.equal(lost, 0, `every one of ${count} acknowledged writes is there or overwritten by a later one`)
  t.equal(wrong, 0, 'each key at its acknowledged revision holds the value written')
  t.ok((await bucket.status()).revision >= top, 'the revision count did not go back')
  t.ok((await stat(join(dir, 'writer', 'snapshot.kv'))).size > 0, 'the writer compacted')
  t.ok((await bucket.put('after', bytes('x'))) > top)
})
