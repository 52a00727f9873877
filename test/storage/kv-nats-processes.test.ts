import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { jetstreamManager } from '@nats-io/jetstream'
import t from 'tap'
import { isKvError, type KvBucket, type KvBucketLimits } from '../../storage/index.js'
import { natsKvServer } from '../helpers/nats-kv.js'
import type { TapTest } from '../contracts/kv-contract.js'

/**
 * Two connections are two processes sharing a bucket: the server decides their races,
 * and each one's watch carries the other's changes, across a restart of the server too.
 */
const nats = await natsKvServer(t)
const LIMITS: KvBucketLimits = { maxKeys: 1000, maxValueBytes: 1024 }
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

/** The same bucket opened through two connections; closed at teardown. */
async function twoProcesses(t: TapTest, timeoutMs = 5000): Promise<[KvBucket, KvBucket]> {
  const dir = await mkdtemp(join(tmpdir(), 'kv-two-'))
  const a = await nats.bucketsOn(await nats.connect(), dir, { timeoutMs })('shared', LIMITS)
  const b = await nats.bucketsOn(await nats.connect(), dir, { timeoutMs })('shared', LIMITS)
  t.teardown(async () => {
    await a.close()
    await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  return [a, b]
}

t.test('a create race between two processes has exactly one winner', async (t) => {
  const [a, b] = await twoProcesses(t)
  const results = await Promise.allSettled(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).create('lock', bytes(`${i}`))))
  t.equal(results.filter((r) => r.status === 'fulfilled').length, 1)
  t.equal(results.filter((r) => r.status === 'rejected' && isKvError(r.reason, 'exists')).length, 39)
})

t.test('a change made by one process is seen by the other\'s watch, deletions included', async (t) => {
  const [a, b] = await twoProcesses(t)
  const watch = b.watch({ include: 'updates_only' })
  const it = watch[Symbol.asyncIterator]()
  const r = await a.create('k', bytes('v'))
  t.match((await it.next()).value, { key: 'k', revision: r, operation: 'PUT', isUpdate: true })
  await a.delete('k')
  t.match((await it.next()).value, { key: 'k', revision: r + 1, operation: 'DEL' })
  t.same(await b.status(), { bucket: b.name, values: 0, revision: r + 1 }, 'the other process counts the keys as they are')
  watch.stop()
})

t.test('maxKeys holds across processes once each has seen the other\'s keys', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kv-full-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const limits = { maxKeys: 2, maxValueBytes: 64 }
  const a = await nats.bucketsOn(await nats.connect(), dir)('full', limits)
  const b = await nats.bucketsOn(await nats.connect(), dir)('full', limits)
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  await a.create('one', bytes('1'))
  await a.create('two', bytes('2'))
  await b.status()
  await t.rejects(b.put('three', bytes('3')), { code: 'bucket_full' })
})

t.test('nats-server restarted under an open watch: writes meanwhile fail unavailable, the watch resumes and misses nothing', async (t) => {
  const [a, b] = await twoProcesses(t, 500)
  await a.create('kept', bytes('1'))
  await a.create('dropped', bytes('2'))
  const watch = b.watch()
  const seen = new Map<string, number>()
  let last = 0
  let ordered = true
  void (async () => {
    for await (const e of watch) {
      ordered &&= e.revision > last
      last = e.revision
      if (e.operation === 'DEL') seen.delete(e.key)
      else seen.set(e.key, e.revision)
    }
  })()
  await watch.initialized
  const node = nats.server.nodes[0]!
  await node.kill()
  await t.rejects(a.put('during', bytes('x')), { code: 'unavailable', transient: true }, 'a write while the server is down')
  await t.rejects(b.get('kept'), { code: 'unavailable', transient: true }, 'and a read')
  await node.restart()
  // JetStream answers a moment after the server is back: the first writes may still fail unavailable.
  const retry = async <T>(op: () => Promise<T>): Promise<T> => {
    for (let i = 0; ; i++) {
      try {
        return await op()
      } catch (err) {
        if (!isKvError(err, 'unavailable') || i > 100) throw err
        await new Promise((r) => setTimeout(r, 50))
      }
    }
  }
  await retry(() => a.put('after', bytes('3')))
  await retry(() => a.delete('dropped'))
  const end = await retry(() => a.put('last', bytes('4')))
  // Resumed on the reconnect itself, not two missed heartbeats (seconds) later.
  const wrote = Date.now()
  while (last < end && Date.now() - wrote < 1000) await new Promise((r) => setTimeout(r, 10))
  t.ok(ordered, 'in revision order throughout')
  t.equal(last, end, 'the watch reached the last change within a second of it')
  const held = new Map<string, number>()
  for (const key of ['kept', 'dropped', 'during', 'after', 'last']) {
    const e = await b.get(key)
    if (e !== null) held.set(key, e.revision)
  }
  t.same(Object.fromEntries(seen), Object.fromEntries(held), 'what the watch built is what the bucket holds (a write that timed out may have been stored)')
  t.equal(seen.has('dropped'), false, 'the deletion made after the restart was seen')
  watch.stop()
})

t.test('a watch whose consumer the server deleted resumes on a new one and misses nothing', async (t) => {
  const [a, b] = await twoProcesses(t)
  const r1 = await a.create('one', bytes('1'))
  const watch = b.watch({ key: 'one' })
  const it = watch[Symbol.asyncIterator]()
  t.match((await it.next()).value, { key: 'one', revision: r1, isUpdate: false })
  const jsm = await jetstreamManager(await nats.connect())
  // Every consumer of the stream: the watch's, and the two buckets' own indexes.
  for await (const c of jsm.consumers.list(`KV_${b.name}`)) await jsm.consumers.delete(`KV_${b.name}`, c.name)
  const r2 = await a.update('one', bytes('2'), r1)
  await a.delete('one')
  // The stream keeps a key's last change only: the resumed watch hands out the deletion, which replaced r2.
  t.match((await it.next()).value, { key: 'one', revision: r2 + 1, operation: 'DEL', isUpdate: true })
  const r4 = await a.create('one', bytes('3'))
  t.match((await it.next()).value, { key: 'one', revision: r4, operation: 'PUT' })
  t.same(await b.status(), { bucket: b.name, values: 1, revision: r4 }, 'the index resumed too')
  watch.stop()
})

t.test('stopped watches leave nothing behind, however soon they are stopped', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kv-stop-'))
  const nc = await nats.connect()
  const b = await nats.bucketsOn(nc, dir)('stops', LIMITS)
  t.teardown(async () => {
    await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  // What a watch holds on its connection: a subscription, and status listeners (the
  // client has no public count of either, so its internals are read).
  const held = () => {
    const p = (nc as unknown as { protocol: { listeners: unknown[]; subscriptions: { size(): number } } }).protocol
    return p.listeners.length + p.subscriptions.size()
  }
  const before = held()
  for (let i = 0; i < 10; i++) {
    const w = b.watch()
    // Stopped as its (empty) bucket's current values are in, while its consumer subscribes;
    // then at once, or once reading.
    if (i < 4) await w.initialized
    else if (i % 2 === 1) {
      await b.put(`k${i}`, bytes('x'))
      await w[Symbol.asyncIterator]().next()
    }
    w.stop()
  }
  const jsm = await jetstreamManager(await nats.connect())
  const consumers = async () => {
    let n = 0
    for await (const _ of jsm.consumers.list(`KV_${b.name}`)) n++
    return n
  }
  const deadline = Date.now() + 2000
  while ((held() > before || (await consumers()) > 1) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
  t.equal(held(), before, 'no subscription or listener left on the connection')
  t.equal(await consumers(), 1, 'only the bucket\'s own index consumer is left on the server')
})

t.test('a watch whose consumer stalls past its backlog ends with watch_overflow and lets go of the changes', async (t) => {
  // The backlog made small (KV_LIMITS.watchBacklog is the default and the most), so the
  // wiring from the server's consumer to the bounded queue is tested in a second.
  const backlog = 1000
  const dir = await mkdtemp(join(tmpdir(), 'kv-stall-'))
  const b = await nats.bucketsIn(dir, { watchBacklog: backlog })('stalled', LIMITS)
  t.teardown(async () => {
    await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  const watch = b.watch({ include: 'updates_only' })
  await watch.initialized
  const it = watch[Symbol.asyncIterator]()
  // Each change of its own key (the stream keeps only the last change of a key, and a
  // watch hands out what it keeps), published without waiting for each acknowledgement.
  const total = 2 * backlog
  const nc = await nats.connect()
  for (let i = 0; i < total; i++) nc.publish(`$KV.${b.name}.k${i}`, bytes('x'))
  await nc.flush()
  // Stored and delivered to this connection (the bucket's own index has them all).
  const storedBy = Date.now() + 30_000
  while ((await b.status()).revision < total && Date.now() < storedBy) await new Promise((r) => setTimeout(r, 20))
  t.equal((await b.status()).revision, total, 'every change stored')
  // Stored is not yet delivered: on a loaded machine the server's pushes to this connection
  // trail the stores, and a reader taking them as they come would keep the queue short.
  // The stall is the point, so the reader waits before it reads at all.
  await new Promise((r) => setTimeout(r, 3_000))
  let taken = 0
  const err = await (async () => {
    try {
      for (;;) {
        // Bounded: a watch that never overflows fails here with a message, not a tap timeout.
        const r = await Promise.race([it.next(), new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`no watch_overflow after ${taken} changes taken`)), 30_000).unref())])
        if (r.done) return undefined
        taken++
      }
    } catch (e) {
      return e
    }
  })()
  t.match(err, { code: 'watch_overflow', transient: true })
  t.equal(taken, 0, 'the queued changes were dropped with the watch')
})
