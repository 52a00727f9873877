import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { KvTicketStore, MemoryTicketStore } from '../../delivery/index.js'
import { fileKvBuckets, type KvBucket } from '../../storage/index.js'
import { newHash, ticketContract, type TapTest } from '../contracts/ticket-contract.js'

/**
 * Stream tickets: both adapters pass one contract; the key-value adapter also shares its
 * tickets between stores on one bucket (processes sharing a NATS KV bucket; here two
 * stores on one file bucket), keeps them across a reopen, and sweeps expired ones.
 */

/** A file bucket for tickets in a throwaway folder, removed at teardown. */
async function ticketsBucket(t: TapTest, maxTickets: number): Promise<{ bucket: KvBucket; reopen: () => Promise<KvBucket> }> {
  const dir = await mkdtemp(join(tmpdir(), 'tickets-'))
  const opened: KvBucket[] = []
  const reopen = async () => {
    const b = await fileKvBuckets({ dir })('tickets', KvTicketStore.bucketLimits(maxTickets))
    opened.push(b)
    return b
  }
  t.teardown(async () => {
    for (const b of opened) await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  return { bucket: await reopen(), reopen }
}

ticketContract(t, 'memory', async (_t, maxTickets) => new MemoryTicketStore(maxTickets))
ticketContract(t, 'kv (file)', async (t, maxTickets) => KvTicketStore.open({ bucket: (await ticketsBucket(t, maxTickets)).bucket }))

t.test('kv: a ticket issued through one store is taken through another on the same bucket, once', async (t) => {
  const { bucket } = await ticketsBucket(t, 100)
  const a = await KvTicketStore.open({ bucket })
  const b = await KvTicketStore.open({ bucket })
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const now = Date.now()
  const hash = newHash()
  await a.put(hash, { rental_id: 'rnt_a', renter_id: 'renter:a' }, now + 60_000)
  t.same(await b.take(hash, now), { rental_id: 'rnt_a', renter_id: 'renter:a' })
  t.equal(await a.take(hash, now), undefined, 'used up for every store')

  const raced = newHash()
  await b.put(raced, { rental_id: 'rnt_b', renter_id: 'renter:b' }, now + 60_000)
  const results = await Promise.all([a.take(raced, now), b.take(raced, now), a.take(raced, now), b.take(raced, now)])
  t.equal(results.filter((r) => r !== undefined).length, 1, 'two stores taking at once: exactly one grant')
})

t.test('kv: tickets outlive a reopen of the bucket (a restarted process), still single use', async (t) => {
  const { bucket, reopen } = await ticketsBucket(t, 100)
  const first = await KvTicketStore.open({ bucket })
  const now = Date.now()
  const hash = newHash()
  await first.put(hash, { rental_id: 'rnt_r', renter_id: 'renter:r' }, now + 60_000)
  await first.close()
  await bucket.close()
  const again = await KvTicketStore.open({ bucket: await reopen() })
  t.teardown(() => again.close())
  t.equal(again.size, 1, 'indexed from the bucket')
  t.same(await again.take(hash, now), { rental_id: 'rnt_r', renter_id: 'renter:r' })
  t.equal(await again.take(hash, now), undefined)
})

t.test('kv: the periodic sweep deletes expired tickets that were never used, and only those', async (t) => {
  const { bucket } = await ticketsBucket(t, 100)
  const store = await KvTicketStore.open({ bucket, sweepMs: 50 })
  t.teardown(() => store.close())
  const now = Date.now()
  for (let i = 0; i < 5; i++) await store.put(newHash(), { rental_id: `rnt_${i}`, renter_id: 'renter:s' }, now + 100)
  const live = newHash()
  await store.put(live, { rental_id: 'rnt_live', renter_id: 'renter:s' }, now + 60_000)
  t.equal((await bucket.status()).values, 6)
  const deadline = Date.now() + 5000
  while ((await bucket.status()).values > 1 && Date.now() < deadline) await sleep(25)
  t.equal((await bucket.status()).values, 1, 'the expired ones are gone from the bucket')
  t.equal(store.size, 1, 'and from the index')
  t.same(await store.take(live, Date.now()), { rental_id: 'rnt_live', renter_id: 'renter:s' })
})

t.test('kv: a value under a ticket key that is no ticket grants nothing', async (t) => {
  const { bucket } = await ticketsBucket(t, 100)
  const store = await KvTicketStore.open({ bucket, onWarning: () => undefined })
  t.teardown(() => store.close())
  const hash = newHash()
  await bucket.create(`ticket.${hash}`, new TextEncoder().encode('{"rental_id":"rnt_x"}'))
  t.equal(await store.take(hash, Date.now()), undefined)
  t.equal(await bucket.get(`ticket.${hash}`), null, 'and it is deleted')
})
