import t from 'tap'
import { LEASE_SHARDS, shardOf, ShardLeases } from '../../delivery/webhooks/shard-lease.js'
import type { RentalRecord } from '../../rentals/index.js'
import type { KvBucket, KvWatchEntry } from '../../storage/index.js'
import { cluster, orderProblems, rentalIdsIn, rentalOf, signedBy, until, type Received } from '../helpers/webhook-cluster.js'

/**
 * Webhook loops are owned by one process at a time through shard leases on the shared
 * `webhooks` bucket. Each "process" here is a Webhooks instance with its own DATA_DIR
 * (holder id and delivery key: the receiver tells them apart by whose key verifies).
 */

const LEASE_MS = 600
const RENEW_MS = LEASE_MS / 3
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const byRental = (got: readonly Received[], rentalId: string) => got.filter((g) => g.rentalId === rentalId)

t.test('two processes share the shards, each rental is delivered by one of them, and a process cut off from the bucket has its shards taken over after the lease time with every event arriving in order', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const a = await c.open('a', LEASE_MS)
  t.equal(a.webhooks.ownership().shards.length, LEASE_SHARDS, 'alone, a process holds every shard')
  const b = await c.open('b', LEASE_MS)
  await until(() => a.webhooks.ownership().shards.length === LEASE_SHARDS / 2 && b.webhooks.ownership().shards.length === LEASE_SHARDS / 2, 5000, 'the shards to be shared')
  const aShards = a.webhooks.ownership().shards
  const bShards = b.webhooks.ownership().shards
  t.same(aShards.filter((s) => bShards.includes(s)), [], 'no shard is held by both')

  const [aIds, bIds] = rentalIdsIn([aShards, bShards], 3) as [string[], string[]]
  const all = [...aIds, ...bIds]
  const expected = new Map<string, string[]>(all.map((id) => [id, []]))
  for (const id of all) {
    rentals.set(id, rentalOf(id, `src_${id}`))
    await a.webhooks.set(rentals.get(id)!, c.url)
  }
  await until(() => aIds.every((id) => a.webhooks.ownership().running.includes(id)) && bIds.every((id) => b.webhooks.ownership().running.includes(id)), 5000, 'the loops to start')
  t.same(a.webhooks.ownership().running.filter((id) => b.webhooks.ownership().running.includes(id)), [], 'no loop runs in both')

  // Every lease write, as the bucket's own watch reports it.
  const leaseWrites: { holder: string; shard: number; at: number }[] = []
  const watch = c.bucket.watch({ key: 'lease.shard.>', include: 'updates_only' })
  void (async () => {
    for await (const e of watch as AsyncIterable<KvWatchEntry>) {
      if (e.operation === 'PUT') leaseWrites.push({ holder: JSON.parse(Buffer.from(e.value).toString()).holder, shard: Number(e.key.split('.')[2]), at: performance.now() })
    }
  })()
  t.teardown(() => watch.stop())

  const pushRound = async () => {
    for (const id of all) expected.get(id)!.push(String(await c.push(`src_${id}`)))
  }
  const delivered = () => all.every((id) => expected.get(id)!.every((e) => c.got.some((g) => g.rentalId === id && g.eventId === e)))
  for (let i = 0; i < 5; i++) await pushRound()
  await until(delivered, 10_000, 'the first events')

  // Signals keep coming while b is cut off.
  let pushing = true
  const pusher = (async () => {
    while (pushing) {
      await pushRound()
      await sleep(25)
    }
  })()
  await sleep(150)
  const cutAt = performance.now()
  b.bucket.cut()
  await sleep(LEASE_MS * 2.5)
  pushing = false
  await pusher
  await until(delivered, 10_000, 'every event after the take-over')
  await until(() => a.webhooks.ownership().shards.length === LEASE_SHARDS, 5000, 'a to hold every shard')

  for (const id of all) {
    const runs: number[] = []
    t.same(orderProblems(byRental(c.got, id), expected.get(id)!, runs), [], `${id}: every event, in order, repeats only of the last run before the take-over`)
    // The cut-off process could not write what it delivered since its last state write: the new holder sends that run again, once.
    t.ok(runs.length <= (bIds.includes(id) ? 1 : 0), `${id}: ${runs.length} runs of repeats (${runs.join(', ')} events)`)
  }
  for (const id of aIds) t.ok(byRental(c.got, id).every((g) => signedBy(a.whpk, g)), `${id} (a's shard): every delivery from a`)
  for (const id of bIds) {
    const signers = byRental(c.got, id).map((g) => (signedBy(b.whpk, g) ? 'b' : signedBy(a.whpk, g) ? 'a' : '?')).join('')
    t.match(signers, /^b+a+$/, `${id} (b's shard): from b, then from a only`)
    const shard = shardOf(id)
    const takeover = leaseWrites.find((w) => w.shard === shard && w.holder === a.webhooks.ownership().holder && w.at > cutAt)
    const lastOfB = leaseWrites.filter((w) => w.shard === shard && w.holder === b.webhooks.ownership().holder).at(-1)
    t.ok(takeover !== undefined, `${id}: a took shard ${shard} over`)
    if (lastOfB !== undefined) t.ok(takeover!.at - lastOfB.at >= LEASE_MS - 30, `shard ${shard} taken over ${Math.round(takeover!.at - lastOfB.at)} ms after b's last renewal (lease ${LEASE_MS} ms)`)
  }
})

t.test('a loop stops at once when another holder takes its shard, and its events follow once the shard is back', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const a = await c.open('a', LEASE_MS)
  const id = 'rnt_steal'
  rentals.set(id, rentalOf(id, 'src_steal'))
  await a.webhooks.set(rentals.get(id)!, c.url)
  const expected = [String(await c.push('src_steal'))]
  await until(() => c.got.length === 1, 5000, 'the first event')

  const key = `lease.shard.${shardOf(id)}`
  const entry = (await c.bucket.get(key))!
  const stolenAt = performance.now()
  const stolenWall = Date.now()
  await c.bucket.update(key, Buffer.from(JSON.stringify({ holder: 'wh_00000000000000aa' })), entry.revision)
  await until(() => !a.webhooks.ownership().running.includes(id), 1000, 'the loop to stop')
  const stoppedIn = performance.now() - stolenAt
  t.ok(stoppedIn < 100, `the loop stopped ${Math.round(stoppedIn)} ms after its shard was taken`)
  t.notOk(a.webhooks.ownership().shards.includes(shardOf(id)), 'the shard is no longer held')

  for (let i = 0; i < 3; i++) expected.push(String(await c.push('src_steal')))
  await until(() => c.got.length === 4, 5000, 'the events after the other holder let the lease expire')
  const resumedIn = c.got[1]!.at - stolenWall
  t.ok(resumedIn >= LEASE_MS - 30, `nothing was sent while the other holder's lease ran (resumed after ${Math.round(resumedIn)} ms)`)
  t.same(orderProblems(c.got, expected), [])
  t.equal(c.got.length, 4, 'none repeated')
})

t.test('a renewal refused for its revision stops the loops of that shard even when the change was not seen on the watch', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  let changes = 0
  // The lease's watch sees nothing (a key no write uses): only its renewals can tell it lost a shard.
  const inner = c.bucket
  const blind: KvBucket = {
    name: inner.name, get: (k) => inner.get(k), create: (k, v) => inner.create(k, v), update: (k, v, r) => inner.update(k, v, r), put: (k, v) => inner.put(k, v),
    delete: (k, o) => inner.delete(k, o), status: () => inner.status(), close: async () => undefined, watch: () => inner.watch({ key: 'nothing.>' }),
  }
  const leases = new ShardLeases({ bucket: blind, holderId: 'wh_00000000000000bb', leaseMs: LEASE_MS, onChange: async () => void changes++ })
  await leases.start()
  t.teardown(() => leases.close())
  t.equal(leases.held().length, LEASE_SHARDS)
  const entry = (await c.bucket.get('lease.shard.5'))!
  const stolenAt = performance.now()
  await c.bucket.update('lease.shard.5', Buffer.from(JSON.stringify({ holder: 'wh_00000000000000cc' })), entry.revision)
  await until(() => !leases.holds(5), 2000, 'the renewal to fail')
  t.ok(performance.now() - stolenAt <= RENEW_MS + 100, `lost at the next renewal, ${Math.round(performance.now() - stolenAt)} ms later`)
  t.ok(changes >= 2, 'the owner was told (start, then the loss)')
  t.equal(leases.held().length, LEASE_SHARDS - 1, 'the other shards are kept')
})

t.test('a webhook removed on one process stops its loop on the other through the watch, not at a lease renewal', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const a = await c.open('a', LEASE_MS)
  const b = await c.open('b', LEASE_MS)
  await until(() => b.webhooks.ownership().shards.length === LEASE_SHARDS / 2, 5000, 'the shards to be shared')
  const [[id]] = rentalIdsIn([a.webhooks.ownership().shards], 1) as [[string]]
  rentals.set(id, rentalOf(id, 'src_rm'))
  await b.webhooks.set(rentals.get(id)!, c.url)
  await until(() => a.webhooks.ownership().running.includes(id), 5000, "the loop to start on a (its shard's holder)")
  t.notOk(b.webhooks.ownership().running.includes(id), 'not on b')
  await c.push('src_rm')
  await until(() => c.got.length === 1, 5000, 'one delivery')

  const started = performance.now()
  t.equal(await b.webhooks.remove(id), true)
  await until(() => !a.webhooks.ownership().running.includes(id), 1000, 'the loop on a to stop')
  const took = performance.now() - started
  // Milliseconds through the watch when the machine is quiet; under a third of the lease either way.
  t.ok(took < LEASE_MS / 3, `a's loop ended ${Math.round(took)} ms after b was asked to remove the webhook`)
  t.equal(await a.webhooks.get(id), null, 'a reads it as removed')
  await c.push('src_rm')
  await sleep(300)
  t.equal(c.got.length, 1, 'nothing more is sent')
})

t.test('a restarted process resumes each rental where it acknowledged: nothing again after a clean stop, at most the last run of events after a crash; it takes its own shards back at once', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const ids = ['rnt_resume1', 'rnt_resume2', 'rnt_resume3']
  const expected = new Map<string, string[]>(ids.map((id) => [id, []]))
  const pushAll = async () => {
    for (const id of ids) expected.get(id)!.push(String(await c.push(`src_${id}`)))
  }
  const delivered = () => ids.every((id) => expected.get(id)!.every((e) => c.got.some((g) => g.rentalId === id && g.eventId === e)))
  let first = await c.open('a', 1500)
  for (const id of ids) {
    rentals.set(id, rentalOf(id, `src_${id}`))
    await first.webhooks.set(rentals.get(id)!, c.url)
  }
  for (let i = 0; i < 5; i++) await pushAll()
  await until(delivered, 5000, 'the first events')
  await first.webhooks.close()

  for (let i = 0; i < 5; i++) await pushAll()
  const second = await c.open('a', 1500)
  await until(delivered, 5000, 'the events after the clean restart')
  t.equal(c.got.length, ids.length * 10, 'after a clean stop nothing is sent twice')

  // A crash: the process loses the bucket mid-stream and its loops end; the next one on its DATA_DIR takes over.
  let pushing = true
  const pusher = (async () => {
    while (pushing) {
      await pushAll()
      await sleep(10)
    }
  })()
  await sleep(100)
  second.bucket.cut()
  await until(() => second.webhooks.ownership().running.length === 0, 3000, 'the cut-off loops to end')
  const third = await c.open('a', 1500)
  t.equal(third.webhooks.ownership().shards.length, LEASE_SHARDS, 'the restarted process holds its shards as soon as it is open, without waiting for them to expire')
  pushing = false
  await pusher
  await until(delivered, 5000, 'every event after the crash')
  for (const id of ids) {
    const runs: number[] = []
    t.same(orderProblems(byRental(c.got, id), expected.get(id)!, runs), [], `${id}: in order, at most the last run before the crash again`)
    t.ok(runs.length <= 1, `${id}: ${runs.length} runs of repeats (${runs.join(', ')} events), at most one for the one crash`)
  }
})

t.test('a clean stop releases the shards after the loops end: the other process takes them at once and nothing is sent twice', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const lease = 5000
  const a = await c.open('a', lease)
  const b = await c.open('b', lease)
  await until(() => b.webhooks.ownership().shards.length === LEASE_SHARDS / 2, 5000, 'the shards to be shared')
  const [[id]] = rentalIdsIn([a.webhooks.ownership().shards], 1) as [[string]]
  rentals.set(id, rentalOf(id, 'src_stop'))
  await a.webhooks.set(rentals.get(id)!, c.url)
  const expected: string[] = []
  for (let i = 0; i < 3; i++) expected.push(String(await c.push('src_stop')))
  await until(() => c.got.length === 3, 5000, 'the first events')

  const stopped = performance.now()
  await a.webhooks.close()
  await until(() => b.webhooks.ownership().shards.length === LEASE_SHARDS, lease, 'b to take every shard')
  const took = performance.now() - stopped
  t.ok(took < lease / 2, `b held every shard ${Math.round(took)} ms after a stopped, without waiting for the ${lease} ms lease`)
  for (let i = 0; i < 3; i++) expected.push(String(await c.push('src_stop')))
  await until(() => c.got.length >= 6, 5000, 'the events after the hand-over')
  await sleep(100)
  t.same(orderProblems(c.got, expected), [])
  t.equal(c.got.length, 6, 'none sent twice')
  t.ok(c.got.slice(3).every((g) => signedBy(b.whpk, g)), 'the later ones from b')
})
