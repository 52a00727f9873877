import { mkdtemp, rm } from 'node:fs/promises'
import { hostname, tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { openJournal, openLeasedConsumer, type LeasedConsumer, type SignalLog } from '../../pipeline/index.js'
import { fileKvBuckets, type KvBucket, type LeaseLoss } from '../../storage/index.js'

/**
 * A durable consumer opened under a lease (pipeline/leased-consumer.ts), on the journal
 * and the file KV adapter: the rules that do not depend on the log's backend. JetStream
 * with a holder killed mid-stream: log-jetstream-lease.test.ts.
 */

const LEASE_MS = 600
type Tap = Parameters<Parameters<typeof t.test>[0]>[0]
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)

async function setup(t: Tap): Promise<{ log: SignalLog; bucket: KvBucket }> {
  const dir = await mkdtemp(join(tmpdir(), 'leased-consumer-'))
  const log = await openJournal({ dir: join(dir, 'log'), fsync: 'never', dedupWindowMs: 60_000 })
  const bucket = await fileKvBuckets({ dir: join(dir, 'kv') })('leases', { maxKeys: 100, maxValueBytes: 1024 })
  t.teardown(async () => {
    await log.close()
    await bucket.close()
    await rm(dir, { recursive: true, force: true })
  })
  for (let i = 1; i <= 5; i++) await log.append(`d${i}`, bytes(`r${i}`))
  return { log, bucket }
}

t.test('a second process opening a leased consumer in refuse mode gets consumer_held naming the holder (host/pid)', async (t) => {
  const { log, bucket } = await setup(t)
  const a = await openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS })
  t.teardown(() => a.close())
  t.match(a.holderId, new RegExp(`^${hostname()}/${process.pid}/\\d+$`))
  const started = performance.now()
  await t.rejects(openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS, holderId: 'other-host/42' }), { code: 'consumer_held', holder: a.holderId })
  t.ok(performance.now() - started <= LEASE_MS / 3 + 100, `refused in ${Math.round(performance.now() - started)} ms`)
  t.ok(a.holds(), 'the holder goes on')
  t.equal((await a.fetch(10, 0)).records.length, 5)
})

t.test('a consumer whose lease is taken stops at once: fetch and ack reject lease_lost and nothing more is acknowledged', async (t) => {
  const { log, bucket } = await setup(t)
  const losses: LeaseLoss[] = []
  const a = await openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS, onLost: (l) => losses.push(l) })
  t.teardown(() => a.close())
  const batch = await a.fetch(10, 0)
  await a.ack(2)
  const entry = (await bucket.get('lease.consumer.recorder'))!
  await bucket.update('lease.consumer.recorder', Buffer.from(JSON.stringify({ holder: 'other-host/42' })), entry.revision)
  for (let i = 0; i < 100 && losses.length === 0; i++) await new Promise((r) => setTimeout(r, 2))
  t.same(losses, [{ reason: 'taken', holder: 'other-host/42' }])
  t.notOk(a.holds())
  await t.rejects(a.ack(batch.records.at(-1)!.seq), { code: 'lease_lost' })
  await t.rejects(a.fetch(10, 0), { code: 'lease_lost' })
  t.equal((await log.consumerInfo('recorder'))?.ackSeq, 2, 'the position stays at the last ack made while the lease held')
})

t.test('a fetch waiting when the lease is taken ends at once with lease_lost, so a consume loop stops rather than going on', async (t) => {
  const { log, bucket } = await setup(t)
  const a = await openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS })
  t.teardown(() => a.close())
  await a.fetch(10, 0)
  const waiting = a.fetch(10, 60_000)
  const entry = (await bucket.get('lease.consumer.recorder'))!
  const at = performance.now()
  await bucket.update('lease.consumer.recorder', Buffer.from(JSON.stringify({ holder: 'other-host/42' })), entry.revision)
  await t.rejects(waiting, { code: 'lease_lost' })
  // At once, not at the fetch's 60 s expiry (loosely: the machine may be loaded).
  t.ok(performance.now() - at < 5_000, `ended ${Math.round(performance.now() - at)} ms after the take-over`)
})

t.test('a fetch waits no longer than the lease is valid, so no pull request outlives it', async (t) => {
  const { log, bucket } = await setup(t)
  const a: LeasedConsumer = await openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS })
  t.teardown(() => a.close())
  await a.fetch(10, 0)
  const started = performance.now()
  t.same((await a.fetch(10, 60_000)).records, [])
  const waited = performance.now() - started
  t.ok(waited <= (LEASE_MS * 2) / 3 + 50, `waited ${Math.round(waited)} ms of 60,000 asked (valid for two thirds of ${LEASE_MS} ms)`)
  t.ok(a.holds(), 'the lease is renewed meanwhile')
})

t.test('close releases the lease: a standby in wait mode opens at once and resumes after the last ack', async (t) => {
  const { log, bucket } = await setup(t)
  const a = await openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS })
  await a.fetch(10, 0)
  await a.ack(3)
  let opened = 0
  const standby = openLeasedConsumer(log, bucket, 'recorder', undefined, { mode: 'wait', leaseMs: LEASE_MS }).then((c) => {
    opened = performance.now()
    return c
  })
  await new Promise((r) => setTimeout(r, LEASE_MS))
  t.equal(opened, 0, 'the standby waits while the holder renews')
  const closed = performance.now()
  await a.close()
  const b = await standby
  t.teardown(() => b.close())
  t.ok(opened - closed < 100, `opened ${Math.round(opened - closed)} ms after the close`)
  t.same((await b.fetch(10, 0)).records.map((r) => r.seq), [4, 5])
})
