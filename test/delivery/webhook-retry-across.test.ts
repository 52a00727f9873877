import t from 'tap'
import type { RentalRecord } from '../../rentals/index.js'
import { cluster, rentalIdsIn, rentalOf, until } from '../helpers/webhook-cluster.js'

/**
 * A retry request is written to the endpoint on the shared `webhooks` bucket, so it ends
 * the wait of a parked event in whichever process delivers the rental, not only in the
 * one that took the request. Two "processes" (Webhooks instances) share the bucket; the
 * first retry waits a minute, so only the request can bring the next attempt within the test.
 */

t.test('a retry asked of one process ends the wait of the event parked in the process that delivers the rental', async (t) => {
  const rentals = new Map<string, RentalRecord>()
  let failing = true
  const c = await cluster(t, rentals, () => (failing ? 503 : 200))
  const slow = { retryFirstMs: 60_000 }
  const a = await c.open('a', 600, slow)
  const b = await c.open('b', 600, slow)
  await until(() => a.webhooks.ownership().shards.length > 0 && b.webhooks.ownership().shards.length > 0, 5000, 'the shards to be shared')
  const [[rentalId]] = rentalIdsIn([b.webhooks.ownership().shards], 1) as [[string]]
  const rental = rentalOf(rentalId, `src_${rentalId}`)
  rentals.set(rentalId, rental)
  await a.webhooks.set(rental, c.url)
  await until(() => b.webhooks.ownership().running.includes(rentalId), 5000, 'b to run the rental')
  const eventId = String(await c.push(rental.source_id))
  // Seen from a: b writes the retry state before the attempt, so once a reads the attempt the event is parked.
  await until(async () => (await a.webhooks.deliveries(rentalId)).attempts.length === 1, 5000, 'the first attempt written')
  failing = false
  const asked = Date.now()
  const answer = await a.webhooks.retry(rental)
  t.same(answer.pending, { event_id: eventId, attempts: 1 }, 'the parked event, as the shared state has it')
  t.notOk(a.webhooks.ownership().running.includes(rentalId), 'a does not run the rental')
  await until(() => c.got.length === 2, 10_000, 'the event tried again')
  t.equal(c.got[1]!.eventId, eventId)
  t.ok(Date.now() - asked < 10_000, 'at once, not after the minute')
})
