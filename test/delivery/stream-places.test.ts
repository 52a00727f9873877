import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { KvStreamPlaces, MemoryStreamPlaces, placesBucketLimits, STREAM_PLACE_TIMING, StreamLimitError, StreamPlacesUnavailableError, type StreamPlaceCounts } from '../../delivery/index.js'
import { fileKvBuckets, type KvBucket } from '../../storage/index.js'
import { streamPlacesContract, type TapTest } from '../contracts/stream-places-contract.js'
import { cuttable } from '../helpers/cuttable-bucket.js'

/**
 * The places of open event streams under the per-rental cap: both adapters pass one
 * contract (the key-value one here on a file bucket, standing in for NATS KV shared by
 * processes); the key-value adapter also renews its entries so a live process keeps its
 * places, gives them up when it cannot renew them in time, writes a failed release again,
 * and makes room in a bucket full of records left by processes that died.
 */

const { renewMs, expireMs } = STREAM_PLACE_TIMING
const never = () => undefined

/** A file bucket of stream places in a throwaway folder, removed at teardown. */
async function placesBucket(t: TapTest, max: number, maxRentals = 1000): Promise<KvBucket> {
  const dir = await mkdtemp(join(tmpdir(), 'stream-places-'))
  const bucket = await fileKvBuckets({ dir })('stream-places', placesBucketLimits(maxRentals, max))
  t.teardown(async () => {
    await bucket.close()
    await rm(dir, { recursive: true, force: true })
  })
  return bucket
}

let views = 0
const holder = () => `test-host/${process.pid}/view${++views}`

streamPlacesContract(t, 'memory', async (_t, max) => {
  const counts: StreamPlaceCounts = new Map()
  return { view: () => new MemoryStreamPlaces(max, counts), expireMs: 0 }
})

streamPlacesContract(t, 'kv (file)', async (t, max, now) => {
  const bucket = await placesBucket(t, max)
  return { view: () => new KvStreamPlaces({ bucket, max, holder: holder(), now }), expireMs }
})

/** Two views on one file bucket with a clock of the test's, each closed at teardown; `cut` is the first view's own access to the bucket. */
async function twoViews(t: TapTest, max: number, maxRentals?: number) {
  const bucket = await placesBucket(t, max, maxRentals)
  const clock = { at: Date.now() }
  const now = () => clock.at
  const cut = cuttable(bucket)
  const writes = { count: 0 }
  const counted: KvBucket = { ...cut, create: (k, v) => (writes.count++, cut.create(k, v)), update: (k, v, r) => (writes.count++, cut.update(k, v, r)), delete: (k, o) => (writes.count++, cut.delete(k, o)) }
  const a = new KvStreamPlaces({ bucket: counted, max, holder: holder(), now })
  const b = new KvStreamPlaces({ bucket, max, holder: holder(), now })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  return { bucket, clock, cut, writes, a, b }
}

t.test('kv: a live holder keeps its places past the expiry by renewing them, one write per rental per period whatever its number of streams', async (t) => {
  const { clock, writes, a, b } = await twoViews(t, 3)
  const start = clock.at
  for (let i = 0; i < 3; i++) await a.take('rnt_busy', never)
  await a.take('rnt_quiet', never)
  writes.count = 0
  while (clock.at < start + 3 * expireMs) {
    clock.at += renewMs
    await a.renew()
  }
  t.equal(writes.count, (3 * expireMs) / renewMs * 2, 'each tick wrote each of the two rentals once')
  await t.rejects(b.take('rnt_busy', never), StreamLimitError, 'three times the expiry later, the places are still held')
})

t.test('kv: a holder that cannot renew gives its places up (its streams are told) before its entry expires, and only then', async (t) => {
  const { clock, cut, a, b } = await twoViews(t, 2)
  const start = clock.at
  const lost: string[] = []
  const first = await a.take('rnt_cut', () => lost.push('first'))
  await a.take('rnt_cut', () => lost.push('second'))
  cut.cut()
  clock.at = start + renewMs
  await a.renew()
  t.same(lost, [], 'one failed renewal: the entry still counts for another period, the streams go on')
  t.equal(first.held, true)
  clock.at = start + 2 * renewMs
  await a.renew()
  t.same(lost.sort(), ['first', 'second'], 'the next would come too late: each stream is told to end')
  t.same([first.held, a.held], [false, 0], 'and its places are no longer held')
  t.ok(clock.at < start + expireMs, 'before the entry expires')
  await t.rejects(b.take('rnt_cut', never), StreamLimitError, 'the other process waits for the expiry')
  clock.at = start + expireMs
  await b.take('rnt_cut', never)
  await b.take('rnt_cut', never)
  t.pass('then takes both')
})

t.test('kv: an admission the store cannot answer is refused with StreamPlacesUnavailableError and takes no place', async (t) => {
  const { cut, a, b } = await twoViews(t, 1)
  cut.cut()
  await t.rejects(a.take('rnt_down', never), StreamPlacesUnavailableError)
  t.equal(a.held, 0)
  await b.take('rnt_down', never)
  t.pass('the place is free for another process')
})

t.test('kv: a release whose write failed is written by the next renewal', async (t) => {
  const { clock, cut, a, b } = await twoViews(t, 2)
  const place = await a.take('rnt_release', never)
  await a.take('rnt_release', never)
  cut.cut()
  place.release()
  await new Promise((resolve) => setImmediate(resolve))
  cut.heal()
  await t.rejects(b.take('rnt_release', never), StreamLimitError, 'the record still counts the place')
  clock.at += renewMs
  await a.renew()
  await b.take('rnt_release', never)
  t.pass('written by the renewal: the place is free')
})

t.test('kv: the record of a rental is deleted with its last place; a bucket full of records left by dead processes is swept to make room', async (t) => {
  const { bucket, clock, a, b } = await twoViews(t, 2, 2)
  const start = clock.at
  const place = await a.take('rnt_once', never)
  t.equal((await bucket.status()).values, 1)
  place.release()
  await a.close()
  t.equal((await bucket.status()).values, 0, 'no record is left behind by a rental without streams')
  const dead = new KvStreamPlaces({ bucket, max: 2, holder: holder(), now: () => clock.at })
  await dead.take('rnt_dead1', never)
  await dead.take('rnt_dead2', never)
  dead.destroy()
  await t.rejects(b.take('rnt_new', never), StreamPlacesUnavailableError, 'full of live records: refused, not admitted unguarded')
  clock.at = start + expireMs
  await b.take('rnt_new', never)
  t.equal((await bucket.status()).values, 1, 'the dead records were swept to make room')
})
