import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { isActive, Rentals, type RentalRecord, type RentalsOptions } from '../../rentals/index.js'
import { fileKvBuckets, type KvBucket, type OpenKvBucket } from '../../storage/index.js'
import type { TapTest } from '../contracts/kv-contract.js'
import { natsKvServer } from '../helpers/nats-kv.js'

const DAY = 86_400_000

const input = (over: Partial<{ renter_id: string; source_id: string; starts_at: number; expires_at: number | null }> = {}) => ({
  renter_id: 'renter-1',
  source_id: 'src_one',
  creator_id: 'creator-1',
  starts_at: Date.now(),
  expires_at: null,
  ...over,
})

t.test('isActive covers starts_at up to the end or expiry, and nothing of an end before the start', async (t) => {
  const base = { rental_id: 'rnt_x', renter_id: 'r', source_id: 's', creator_id: 'c', created_at: '2030-01-01T00:00:00.000Z', ended_at: null, end_reason: null } as const
  const open: RentalRecord = { ...base, state: 'active', starts_at: '2030-01-01T00:00:00.000Z', expires_at: '2030-01-02T00:00:00.000Z' }
  const at = (s: string) => Date.parse(s)
  t.equal(isActive(open, at('2029-12-31T23:59:59.999Z')), false, 'before starts_at')
  t.equal(isActive(open, at('2030-01-01T00:00:00.000Z')), true, 'at starts_at')
  t.equal(isActive(open, at('2030-01-01T23:59:59.999Z')), true)
  t.equal(isActive(open, at('2030-01-02T00:00:00.000Z')), false, 'at expires_at')
  const ended: RentalRecord = { ...open, state: 'ended', ended_at: '2030-01-01T12:00:00.000Z', end_reason: 'ended' }
  t.equal(isActive(ended, at('2030-01-01T11:59:59.999Z')), true)
  t.equal(isActive(ended, at('2030-01-01T12:00:00.000Z')), false, 'at ended_at')
  const endedEarly: RentalRecord = { ...open, state: 'ended', ended_at: '2029-12-01T00:00:00.000Z', end_reason: 'ended' }
  t.equal(isActive(endedEarly, at('2030-01-01T06:00:00.000Z')), false, 'ended while scheduled: never active')
})

/** Every test of the store, on the buckets `buckets(dir)` opens (a fresh folder per test). */
function rentalStoreTests(t: TapTest, buckets: (dir: string) => OpenKvBucket): void {
  /** A bucket in a fresh folder, and Rentals on it; all closed and removed at teardown. */
  async function setup(t: TapTest, options: Partial<RentalsOptions> = {}) {
    const dir = await mkdtemp(join(tmpdir(), 'rentals-'))
    let bucket: KvBucket = await buckets(dir)('rentals', { maxKeys: 1000, maxValueBytes: 64 * 1024 })
    const opened: Rentals[] = []
    const warnings: string[] = []
    const open = async (more: Partial<RentalsOptions> = {}) => {
      const r = await Rentals.open({ bucket, maxRentals: 100, keepEndedMs: 30 * DAY, onWarning: (m) => warnings.push(m), ...options, ...more })
      opened.push(r)
      return r
    }
    t.teardown(async () => {
      for (const r of opened) await r.close()
      await bucket.close()
      await rm(dir, { recursive: true, force: true })
    })
    const restart = async (more: Partial<RentalsOptions> = {}) => {
      for (const r of opened.splice(0)) await r.close()
      await bucket.close()
      bucket = await buckets(dir)('rentals', { maxKeys: 1000, maxValueBytes: 64 * 1024 })
      return open(more)
    }
    return { rentals: await open(), open, restart, bucket: () => bucket, warnings }
  }


  t.test('a rental starting now is active, and reads back by id and in the lists', async (t) => {
    const { rentals } = await setup(t)
    const r = await rentals.create(input())
    t.match(r, { renter_id: 'renter-1', source_id: 'src_one', creator_id: 'creator-1', state: 'active', expires_at: null, ended_at: null, end_reason: null })
    t.match(r.rental_id, /^rnt_[A-Za-z0-9_-]{16}$/)
    t.same(rentals.get(r.rental_id), r)
    t.same(rentals.candidates({ renter_id: 'renter-1' }), [r])
    t.same(rentals.candidates({ source_id: 'src_one' }), [r])
    t.same(rentals.candidates({ renter_id: 'renter-2' }), [])
    t.equal(rentals.get('rnt_missing'), undefined)
  })

  t.test('a rental with a future starts_at is scheduled until then, then active by time alone', async (t) => {
    let clock = Date.now()
    const { rentals } = await setup(t, { now: () => clock })
    const r = await rentals.create(input({ starts_at: clock + 60_000 }))
    t.equal(r.state, 'scheduled')
    clock += 60_000
    t.equal(rentals.get(r.rental_id)!.state, 'active')
  })

  t.test('reads show a rental expired from its expires_at on, even before the timer has written it', async (t) => {
    let clock = Date.now()
    const { rentals, bucket } = await setup(t, { now: () => clock })
    // Due in a day of real time, so the timer does not run during the test.
    const r = await rentals.create(input({ starts_at: clock, expires_at: clock + DAY }))
    clock += DAY
    t.match(rentals.get(r.rental_id), { state: 'expired', ended_at: r.expires_at, end_reason: 'expired' })
    const stored = JSON.parse(Buffer.from((await bucket().get(`rental.${r.rental_id}`))!.value).toString())
    t.equal(stored.state, 'active', 'the stored record is still the one written at creation')
    t.same(rentals.activeAt('src_one', clock), [])
  })

  t.test('expiry writes the rental expired by itself, at its expires_at, and tells the listeners', async (t) => {
    const { rentals, bucket } = await setup(t)
    const changes: RentalRecord[] = []
    rentals.onChange((r) => changes.push(r))
    const expiresAt = Date.now() + 200
    const r = await rentals.create(input({ expires_at: expiresAt }))
    for (let i = 0; i < 50 && changes.length < 2; i++) await sleep(20)
    const written = Date.now()
    // At its expires_at, by its own timer (loosely: a loaded machine's timers run late).
      t.ok(written - expiresAt < 800, `written within 800 ms of expires_at (${written - expiresAt} ms)`)
    t.match(changes.map((c) => c.state), ['active', 'expired'])
    const stored = JSON.parse(Buffer.from((await bucket().get(`rental.${r.rental_id}`))!.value).toString())
    t.match(stored, { state: 'expired', ended_at: new Date(expiresAt).toISOString(), end_reason: 'expired' })
  })


  t.test('activeAt lists the rentals of a source active at a time', async (t) => {
    let clock = Date.now()
    const { rentals } = await setup(t, { now: () => clock })
    const now = clock
    const a = await rentals.create(input({ renter_id: 'a', starts_at: now, expires_at: now + 10 * DAY }))
    const b = await rentals.create(input({ renter_id: 'b', starts_at: now + DAY }))
    await rentals.create(input({ renter_id: 'c', source_id: 'src_other' }))
    t.same(rentals.activeAt('src_one', now + 1).map((r) => r.rental_id), [a.rental_id])
    t.same(rentals.activeAt('src_one', now + 2 * DAY).map((r) => r.rental_id).sort(), [a.rental_id, b.rental_id].sort())
    clock += 3 * DAY
    await rentals.end(a.rental_id)
    t.same(rentals.activeAt('src_one', clock + 1).map((r) => r.rental_id), [b.rental_id])
    t.same(rentals.activeAt('src_one', now + 2 * DAY).map((r) => r.rental_id).sort(), [a.rental_id, b.rental_id].sort(), 'a signal accepted before the end still belonged to it')
  })

  t.test('ending a rental is final; ending it again, or an expired one, returns it unchanged', async (t) => {
    let clock = Date.now()
    const { rentals } = await setup(t, { now: () => clock })
    const r = await rentals.create(input())
    clock += 1000
    const ended = await rentals.end(r.rental_id)
    t.match(ended, { state: 'ended', ended_at: new Date(clock).toISOString(), end_reason: 'ended' })
    clock += 1000
    t.same(await rentals.end(r.rental_id), ended, 'the same record, the first end time')
    const e = await rentals.create(input({ renter_id: 'r2', expires_at: clock + DAY }))
    clock += DAY
    t.match(await rentals.end(e.rental_id), { state: 'expired', end_reason: 'expired' })
    await t.rejects(rentals.end('rnt_missing'), { code: 'not_found' })
  })

  t.test('two stores on one bucket: ends racing from both write once, and both answer the same record', async (t) => {
    const { rentals, open, bucket } = await setup(t)
    const other = await open()
    const r = await rentals.create(input())
    let writes = 0
    const watch = bucket().watch({ key: `rental.${r.rental_id}`, include: 'updates_only' })
    void (async () => {
      for await (const _ of watch) writes++
    })()
    const results = await Promise.all([rentals.end(r.rental_id), other.end(r.rental_id), rentals.end(r.rental_id), other.end(r.rental_id)])
    await sleep(20)
    watch.stop()
    t.equal(writes, 1, 'one end was written')
    for (const res of results) t.same(res, results[0])
  })

  t.test('two stores racing to expire one rental write it once', async (t) => {
    const { rentals, open, bucket } = await setup(t)
    const other = await open()
    const watch = bucket().watch({ key: 'rental.>', include: 'updates_only' })
    const seen: string[] = []
    void (async () => {
      for await (const e of watch) seen.push(JSON.parse(Buffer.from(e.value).toString()).state)
    })()
    await rentals.create(input({ expires_at: Date.now() + 100 }))
    for (let i = 0; i < 50 && !seen.includes('expired'); i++) await sleep(20)
    await sleep(100)
    watch.stop()
    t.same(seen, ['active', 'expired'])
    void other
  })

  t.test('a change made by one store is in the other\'s index within 100 ms', async (t) => {
    const { rentals, open } = await setup(t)
    const other = await open()
    const r = await rentals.create(input())
    const t0 = Date.now()
    while (other.get(r.rental_id) === undefined && Date.now() - t0 < 100) await sleep(1)
    t.same(other.get(r.rental_id), r)
    await rentals.end(r.rental_id)
    while (other.get(r.rental_id)!.state !== 'ended' && Date.now() - t0 < 200) await sleep(1)
    t.equal(other.get(r.rental_id)!.state, 'ended')
  })

  t.test('open rentals per renter are bounded across stores racing to create them', async (t) => {
    const { rentals, open } = await setup(t, { openPerRenter: 3 })
    const other = await open()
    const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? rentals : other).create(input({ source_id: `src_${i}` }))))
    const made = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []))
    t.equal(made.length, 3)
    for (const r of results) if (r.status === 'rejected') t.match(r.reason, { code: 'limit_exceeded' })
    await rentals.end(made[0]!.rental_id)
    t.ok(await other.create(input({ source_id: 'src_after' })), 'an ended rental frees its place')
    await t.rejects(other.create(input({ source_id: 'src_more' })), { code: 'limit_exceeded' })
    t.ok(await other.create(input({ renter_id: 'renter-2' })), 'another renter is not held by it')
  })

  t.test('open rentals per source are bounded; a scheduled one counts, an expired one does not', async (t) => {
    let clock = Date.now()
    const { rentals } = await setup(t, { openPerSource: 2, now: () => clock })
    await rentals.create(input({ renter_id: 'a', starts_at: clock + DAY }))
    await rentals.create(input({ renter_id: 'b', expires_at: clock + DAY }))
    await t.rejects(rentals.create(input({ renter_id: 'c' })), { code: 'limit_exceeded', message: /source src_one has 2 open rentals/ })
    clock += DAY
    t.ok(await rentals.create(input({ renter_id: 'c', starts_at: clock })))
  })

  t.test('rentals in all are bounded by maxRentals', async (t) => {
    const { rentals } = await setup(t, { maxRentals: 2 })
    await rentals.create(input({ renter_id: 'a' }))
    await rentals.create(input({ renter_id: 'b' }))
    await t.rejects(rentals.create(input({ renter_id: 'c' })), { code: 'limit_exceeded' })
  })

  t.test('rentals survive a restart, and one that expired while it was down is written expired at start', async (t) => {
    const { rentals, restart, bucket } = await setup(t)
    const kept = await rentals.create(input({ renter_id: 'a' }))
    const ended = await rentals.end((await rentals.create(input({ renter_id: 'b' }))).rental_id)
    const expiring = await rentals.create(input({ renter_id: 'c', expires_at: Date.now() + DAY }))
    const clock = Date.now() + 2 * DAY
    const again = await restart({ now: () => clock })
    t.same(again.get(kept.rental_id), kept)
    t.same(again.get(ended.rental_id), ended)
    t.equal(again.get(expiring.rental_id)!.state, 'expired')
    for (let i = 0; i < 50; i++) {
      const stored = JSON.parse(Buffer.from((await bucket().get(`rental.${expiring.rental_id}`))!.value).toString())
      if (stored.state === 'expired') break
      await sleep(10)
    }
    const stored = JSON.parse(Buffer.from((await bucket().get(`rental.${expiring.rental_id}`))!.value).toString())
    t.equal(stored.state, 'expired', 'the timer ran at once for an expiry already past')
  })

  t.test('the sweep deletes rentals ended longer ago than keepEndedMs, and claims that no longer hold', async (t) => {
    let clock = Date.now()
    const { rentals, bucket } = await setup(t, { now: () => clock, keepEndedMs: DAY })
    const old = await rentals.create(input({ renter_id: 'a' }))
    await rentals.end(old.rental_id)
    const open = await rentals.create(input({ renter_id: 'b' }))
    clock += DAY + 1
    const recent = await rentals.create(input({ renter_id: 'c' }))
    await rentals.end(recent.rental_id)
    t.equal(await rentals.sweep(), 1)
    t.equal(rentals.get(old.rental_id), undefined)
    t.ok(rentals.get(open.rental_id))
    t.ok(rentals.get(recent.rental_id), 'ended a moment ago: kept')
    t.equal(await bucket().get(`rental.${old.rental_id}`), null)
    // Renters a and c have no open rental: their claims documents went; b's and the source's stay.
    t.equal((await bucket().status()).values, 4)
  })
}

// The same store on both adapters of the key-value port: one process's file buckets, and
// NATS KV buckets as the cluster shares them (one nats-server for this file).
const nats = await natsKvServer(t)
t.test('on file buckets', async (t) => rentalStoreTests(t, (dir) => fileKvBuckets({ dir })))
t.test('on NATS KV buckets', async (t) => rentalStoreTests(t, (dir) => nats.bucketsIn(dir)))
