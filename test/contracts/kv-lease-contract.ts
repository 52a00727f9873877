/**
 * Behaviour of a lease on the key-value port (storage/kv-lease.ts) that must hold on
 * every KvBucket adapter: run with the file adapter in test/storage/kv-lease.test.ts, and
 * by the NATS KV adapter's tests when it comes. Holders are KvLease instances with holder
 * ids of their own on one bucket, as processes share a bucket; a holder that "dies" or
 * is cut off sees its bucket fail (test/helpers/cuttable-bucket.ts) while the others go on.
 *
 * Usage: kvLeaseContract(t, 'file', (dir, name, limits) => fileKvBuckets({ dir })(name, limits))
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { KvLease, type KvBucket, type KvWatchEntry, type LeaseLoss } from '../../storage/index.js'
import { cuttable } from '../helpers/cuttable-bucket.js'
import type { OpenBucket, TapTest } from './kv-contract.js'

const LEASE_MS = 600
const RENEW_MS = LEASE_MS / 3
const KEY = 'lease.consumer.c'

async function bucketFor(t: TapTest, open: OpenBucket): Promise<KvBucket> {
  const dir = await mkdtemp(join(tmpdir(), 'kv-lease-'))
  const bucket = await open(dir, 'leases', { maxKeys: 100, maxValueBytes: 1024 })
  t.teardown(async () => {
    await bucket.close()
    await rm(dir, { recursive: true, force: true })
  })
  return bucket
}

/** A holder whose lease is released at teardown; `losses` collects what `onLost` reported. */
function holder(t: TapTest, bucket: KvBucket, id: string) {
  const losses: (LeaseLoss & { at: number })[] = []
  const lease = new KvLease({ bucket, key: KEY, holderId: id, leaseMs: LEASE_MS, onLost: (loss) => losses.push({ ...loss, at: performance.now() }) })
  t.teardown(() => lease.release())
  return { lease, losses }
}

/** Every write of the key with when it was seen, from the bucket's watch. */
function writesOf(t: TapTest, bucket: KvBucket) {
  const writes: { holder: string | null; at: number }[] = []
  const watch = bucket.watch({ key: KEY, include: 'updates_only' })
  void (async () => {
    for await (const e of watch as AsyncIterable<KvWatchEntry>) {
      writes.push({ holder: e.operation === 'DEL' ? null : (JSON.parse(Buffer.from(e.value).toString()) as { holder: string }).holder, at: performance.now() })
    }
  })()
  t.teardown(() => watch.stop())
  return writes
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export function kvLeaseContract(tap: TapTest, label: string, open: OpenBucket): void {
  tap.test(`${label}: leases`, async (tap) => {
    tap.test('of holders racing for a free key exactly one takes it, and every other is refused naming it', async (t) => {
      const bucket = await bucketFor(t, open)
      const holders = Array.from({ length: 5 }, (_, i) => holder(t, bucket, `host/${100 + i}`))
      const results = await Promise.all(holders.map((h) => h.lease.acquire('refuse')))
      const winners = results.flatMap((r, i) => (r.held ? [`host/${100 + i}`] : []))
      t.equal(winners.length, 1, `one winner: ${winners.join(', ')}`)
      t.same(results.filter((r) => !r.held), Array(4).fill({ held: false, holder: winners[0] }), 'the others are told who holds it')
      t.same(holders.filter((h, i) => !results[i]!.held && h.lease.holds()), [], 'none of the others holds it afterwards')
    })

    tap.test('refuse: a live holder is named within one renewal period; a dead holder is not refused for ever but taken over once its lease lapsed', async (t) => {
      const bucket = await bucketFor(t, open)
      const a = holder(t, bucket, 'host/1')
      t.same(await a.lease.acquire('refuse'), { held: true })
      const b = holder(t, bucket, 'host/2')
      const asked = performance.now()
      t.same(await b.lease.acquire('refuse'), { held: false, holder: 'host/1' })
      const took = performance.now() - asked
      t.ok(took <= RENEW_MS + 100, `refused after ${Math.round(took)} ms (renewal every ${RENEW_MS} ms)`)
      t.ok(a.lease.holds(), 'the holder keeps it')

      // The holder dies: no renewal, no release.
      const cutA = cuttable(bucket)
      const dead = holder(t, cutA, 'host/3')
      await a.lease.release()
      t.same(await dead.lease.acquire('refuse'), { held: true })
      cutA.cut()
      const writes = writesOf(t, bucket)
      const c = holder(t, bucket, 'host/4')
      const start = performance.now()
      t.same(await c.lease.acquire('refuse'), { held: true }, 'the dead holder\'s lease is taken')
      t.ok(performance.now() - start >= LEASE_MS, `after the lease time (${Math.round(performance.now() - start)} ms)`)
      t.equal(writes.at(-1)?.holder, 'host/4')
    })

    tap.test('wait: a standby takes over only after the dead holder\'s lease lapsed, and the holder stopped before that', async (t) => {
      const bucket = await bucketFor(t, open)
      const writes = writesOf(t, bucket)
      const cutA = cuttable(bucket)
      const a = holder(t, cutA, 'host/1')
      await a.lease.acquire('wait')
      const b = holder(t, bucket, 'host/2')
      const waiting = b.lease.acquire('wait')
      await sleep(LEASE_MS) // a renews meanwhile: the standby must not take it
      t.notOk(b.lease.holds(), 'no take-over while the holder renews')
      cutA.cut() // dies: its renewals stop reaching the bucket
      t.same(await waiting, { held: true })
      const takenAt = performance.now()
      const lastOfA = writes.filter((w) => w.holder === 'host/1').at(-1)!
      t.ok(takenAt - lastOfA.at >= LEASE_MS, `taken ${Math.round(takenAt - lastOfA.at)} ms after the holder's last renewal (lease ${LEASE_MS} ms)`)
      t.equal(a.losses.length, 1, 'the holder was told once')
      t.equal(a.losses[0]?.reason, 'expired')
      t.ok(a.losses[0]!.at < takenAt, `the holder stopped ${Math.round(takenAt - a.losses[0]!.at)} ms before the take-over`)
      t.notOk(a.lease.holds())
    })

    tap.test('a holder that cannot renew stops itself before its lease can lapse for anyone else', async (t) => {
      const bucket = await bucketFor(t, open)
      const cutA = cuttable(bucket)
      const a = holder(t, cutA, 'host/1')
      const writes = writesOf(t, bucket)
      await a.lease.acquire('refuse')
      await sleep(RENEW_MS * 1.5)
      cutA.cut()
      const lastWrite = writes.filter((w) => w.holder === 'host/1').at(-1)!
      await sleep(LEASE_MS)
      t.equal(a.losses.length, 1, 'told once')
      t.equal(a.losses[0]?.reason, 'expired')
      const after = a.losses[0]!.at - lastWrite.at
      // Valid for two thirds of the lease time from sending that renewal; a taker waits the whole lease time from seeing it.
      t.ok(after < LEASE_MS, `stopped ${Math.round(after)} ms after its last renewal was stored (valid ${LEASE_MS - RENEW_MS} ms, lease ${LEASE_MS} ms)`)
      t.notOk(a.lease.holds())
    })

    tap.test('a clean release hands the lease to a waiting standby at once', async (t) => {
      const bucket = await bucketFor(t, open)
      const a = holder(t, bucket, 'host/1')
      await a.lease.acquire('wait')
      const b = holder(t, bucket, 'host/2')
      const waiting = b.lease.acquire('wait')
      await sleep(50)
      const released = performance.now()
      await a.lease.release()
      t.same(await waiting, { held: true })
      const took = performance.now() - released
      // A lapse would take most of the lease time; a release is seen at once (loosely: a loaded machine).
      t.ok(took < LEASE_MS / 2, `taken ${Math.round(took)} ms after the release (lease ${LEASE_MS} ms)`)
      t.same(a.losses, [], 'a release is no loss')
    })

    tap.test('a holder whose key another writer takes stops at once, naming it', async (t) => {
      const bucket = await bucketFor(t, open)
      const a = holder(t, bucket, 'host/1')
      await a.lease.acquire('refuse')
      const entry = (await bucket.get(KEY))!
      const at = performance.now()
      await bucket.update(KEY, Buffer.from(JSON.stringify({ holder: 'host/9' })), entry.revision)
      for (let i = 0; i < 100 && a.losses.length === 0; i++) await sleep(2)
      t.same(a.losses.map((l) => ({ reason: l.reason, holder: l.holder })), [{ reason: 'taken', holder: 'host/9' }])
      t.ok(a.losses[0]!.at - at < 50, `stopped ${Math.round(a.losses[0]!.at - at)} ms after the write`)
      t.notOk(a.lease.holds())
    })
  })
}
