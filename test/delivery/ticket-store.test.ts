import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { KvTicketStore, MemoryTicketStore, TicketLimitError, type TicketBounds } from '../../delivery/index.js'
import { holdingsKey } from '../../delivery/ticket-holdings-kv.js'
import { fileKvBuckets, type KvBucket } from '../../storage/index.js'
import { newHash, ticketContract, type TapTest } from '../contracts/ticket-contract.js'

/**
 * Stream tickets: both adapters pass one contract; the key-value adapter also shares its
 * tickets, and the places its bounds count, between stores on one pair of buckets
 * (processes sharing NATS KV buckets; here two stores on file buckets), keeps them across
 * a reopen, and sweeps expired tickets and records.
 */

const BOUNDS: TicketBounds = { maxPerRental: 100, maxPerRenter: 100 }

interface TicketBuckets {
  readonly bucket: KvBucket
  readonly holdings: KvBucket
}

/** File buckets for tickets and their holdings in a throwaway folder, removed at teardown. */
async function ticketsBucket(t: TapTest, maxTickets: number, bounds = BOUNDS): Promise<TicketBuckets & { reopen: () => Promise<TicketBuckets> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tickets-'))
  const opened: KvBucket[] = []
  const reopen = async () => {
    const open = fileKvBuckets({ dir })
    const b = { bucket: await open('tickets', KvTicketStore.bucketLimits(maxTickets)), holdings: await open('ticket-holdings', KvTicketStore.holdingsLimits(maxTickets, bounds)) }
    opened.push(b.bucket, b.holdings)
    return b
  }
  t.teardown(async () => {
    for (const b of opened) await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  return { ...(await reopen()), reopen }
}

ticketContract(t, 'memory', async (_t, maxTickets, bounds) => new MemoryTicketStore(maxTickets, bounds))
ticketContract(t, 'kv (file)', async (t, maxTickets, bounds) => KvTicketStore.open({ ...(await ticketsBucket(t, maxTickets, bounds)), bounds }))

t.test('kv: a ticket issued through one store is taken through another on the same bucket, once', async (t) => {
  const buckets = await ticketsBucket(t, 100)
  const a = await KvTicketStore.open({ ...buckets, bounds: BOUNDS })
  const b = await KvTicketStore.open({ ...buckets, bounds: BOUNDS })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const now = Date.now()
  const hash = newHash()
  await a.put(hash, { rental_id: 'rnt_a', renter_id: 'renter:a' }, now + 60_000, now)
  t.same(await b.take(hash, now), { rental_id: 'rnt_a', renter_id: 'renter:a' })
  t.equal(await a.take(hash, now), undefined, 'used up for every store')

  const raced = newHash()
  await b.put(raced, { rental_id: 'rnt_b', renter_id: 'renter:b' }, now + 60_000, now)
  const results = await Promise.all([a.take(raced, now), b.take(raced, now), a.take(raced, now), b.take(raced, now)])
  t.equal(results.filter((r) => r !== undefined).length, 1, 'two stores taking at once: exactly one grant')
})

t.test('kv: tickets outlive a reopen of the bucket (a restarted process), still single use', async (t) => {
  const { bucket, holdings, reopen } = await ticketsBucket(t, 100)
  const first = await KvTicketStore.open({ bucket, holdings, bounds: BOUNDS })
  const now = Date.now()
  const hash = newHash()
  await first.put(hash, { rental_id: 'rnt_r', renter_id: 'renter:r' }, now + 60_000, now)
  await first.close()
  await bucket.close()
  await holdings.close()
  const again = await KvTicketStore.open({ ...(await reopen()), bounds: BOUNDS })
  t.teardown(() => again.close())
  t.equal(again.size, 1, 'indexed from the bucket')
  t.same(await again.take(hash, now), { rental_id: 'rnt_r', renter_id: 'renter:r' })
  t.equal(await again.take(hash, now), undefined)
})

t.test('kv: the periodic sweep deletes expired tickets that were never used, and only those', async (t) => {
  const { bucket, holdings } = await ticketsBucket(t, 100)
  const store = await KvTicketStore.open({ bucket, holdings, bounds: BOUNDS, sweepMs: 50 })
  t.teardown(() => store.close())
  const now = Date.now()
  for (let i = 0; i < 5; i++) await store.put(newHash(), { rental_id: `rnt_${i}`, renter_id: 'renter:s' }, now + 100, now)
  const live = newHash()
  await store.put(live, { rental_id: 'rnt_live', renter_id: 'renter:s' }, now + 60_000, now)
  t.equal((await bucket.status()).values, 6)
  t.equal((await holdings.status()).values, 7, 'a record per rental and one for the renter')
  const deadline = Date.now() + 5000
  while (((await bucket.status()).values > 1 || (await holdings.status()).values > 2) && Date.now() < deadline) await sleep(25)
  t.equal((await bucket.status()).values, 1, 'the expired ones are gone from the bucket')
  t.equal(store.size, 1, 'and from the index')
  t.equal((await holdings.status()).values, 2, 'the records of rentals whose tickets all expired are gone; the live rental\'s and the renter\'s stay')
  t.same(await store.take(live, Date.now()), { rental_id: 'rnt_live', renter_id: 'renter:s' })
})

t.test('kv: a value under a ticket key that is no ticket grants nothing', async (t) => {
  const { bucket, holdings } = await ticketsBucket(t, 100)
  const store = await KvTicketStore.open({ bucket, holdings, bounds: BOUNDS, onWarning: () => undefined })
  t.teardown(() => store.close())
  const hash = newHash()
  await bucket.create(`ticket.${hash}`, new TextEncoder().encode('{"rental_id":"rnt_x"}'))
  t.equal(await store.take(hash, Date.now()), undefined)
  t.equal(await bucket.get(`ticket.${hash}`), null, 'and it is deleted')
})

t.test('kv: two stores on the same buckets racing for the last places of a renter never pass its bound together', async (t) => {
  const bounds = { maxPerRental: 4, maxPerRenter: 6 }
  const buckets = await ticketsBucket(t, 100, bounds)
  const a = await KvTicketStore.open({ ...buckets, bounds })
  const b = await KvTicketStore.open({ ...buckets, bounds })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const now = Date.now()
  const issue = (store: KvTicketStore, rental: string) =>
    store.put(newHash(), { rental_id: rental, renter_id: 'renter:both' }, now + 60_000, now).then(
      () => 'ok',
      (err: unknown) => (err instanceof TicketLimitError ? err.scope : String(err)),
    )
  const onOne = await Promise.all(Array.from({ length: 10 }, (_, i) => issue(i % 2 === 0 ? a : b, 'rnt_one')))
  t.equal(onOne.filter((r) => r === 'ok').length, 4, 'one rental: exactly its bound, over both stores')
  const onMany = await Promise.all(Array.from({ length: 10 }, (_, i) => issue(i % 2 === 0 ? a : b, `rnt_m${i}`)))
  t.equal(onMany.filter((r) => r === 'ok').length, 2, 'the renter over other rentals: exactly what its bound left')
  t.same([...new Set([...onOne, ...onMany].filter((r) => r !== 'ok'))].sort(), ['rental', 'renter'], 'the others refused by a bound, none failed otherwise')
})

t.test('kv: places a process took and never recorded a ticket for (it died) free themselves when they expire', async (t) => {
  const bounds = { maxPerRental: 2, maxPerRenter: 10 }
  const { bucket, holdings } = await ticketsBucket(t, 100, bounds)
  const store = await KvTicketStore.open({ bucket, holdings, bounds })
  t.teardown(() => store.close())
  const now = Date.now()
  // What a process leaves when it dies after taking the rental's places, before writing the tickets.
  await holdings.create(holdingsKey('rental', 'rnt_dead'), new TextEncoder().encode(JSON.stringify({ tickets: [[newHash(), now + 1000], [newHash(), now + 2000]] })))
  await t.rejects(store.put(newHash(), { rental_id: 'rnt_dead', renter_id: 'renter:d' }, now + 60_000, now), TicketLimitError, 'the places are held')
  await store.put(newHash(), { rental_id: 'rnt_dead', renter_id: 'renter:d' }, now + 60_000, now + 1000)
  t.pass('one place back once the first expired')
  await t.rejects(store.put(newHash(), { rental_id: 'rnt_dead', renter_id: 'renter:d' }, now + 60_000, now + 1999), TicketLimitError)
  await store.put(newHash(), { rental_id: 'rnt_dead', renter_id: 'renter:d' }, now + 60_000, now + 2000)
  t.pass('the other once it expired')
})
