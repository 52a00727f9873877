import t from 'tap'
import { LEASE_SHARDS } from '../../delivery/webhooks/shard-lease.js'
import type { RentalRecord } from '../../rentals/index.js'
import { cluster, rentalOf, until } from '../helpers/webhook-cluster.js'

/**
 * What the leases cost the embedded deployment (one process per DATA_DIR): with 4,000
 * rentals with webhooks, idle, the bucket takes only the lease renewals, a number of
 * writes set by the shard count and the lease time, not by the rentals (a write per
 * rental would be 4,000 in the window measured).
 */

const RENTALS = 4_000
// The default. A holder stops counting on a shard two thirds of the lease after its last
// renewal was sent, and starting or stopping thousands of loops keeps the event loop busy for
// seconds on a loaded machine: a much shorter lease would have the shards lapse and be
// taken back over and over, which is not what an idle deployment does.
const LEASE_MS = 15_000
// Two renewal rounds (every third of the lease); the cost scales as 1 / WEBHOOK_LEASE_MS.
const MEASURE_MS = 10_000

t.test(`the leases cost a bounded number of writes: ${RENTALS} idle webhook rentals in one process`, async (t) => {
  const rentals = new Map<string, RentalRecord>()
  const c = await cluster(t, rentals)
  const started = performance.now()
  const a = await c.open('a', LEASE_MS)
  for (let i = 0; i < RENTALS; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, RENTALS - i) }, (_, k) => {
      const rental = rentalOf(`rnt_cost${i + k}`, `src_cost${(i + k) % 100}`)
      rentals.set(rental.rental_id, rental)
      return a.webhooks.set(rental, c.url)
    }))
  }
  await until(() => a.webhooks.ownership().running.length === RENTALS, 60_000, 'every loop to run')
  t.comment(`${RENTALS} webhooks set and their loops running in ${Math.round(performance.now() - started)} ms`)
  t.equal(a.webhooks.ownership().shards.length, LEASE_SHARDS)

  const before = { revision: (await c.bucket.status()).revision, leaseWrites: a.webhooks.ownership().leaseWrites, at: performance.now(), cpu: process.cpuUsage() }
  await new Promise((r) => setTimeout(r, MEASURE_MS))
  const after = { revision: (await c.bucket.status()).revision, leaseWrites: a.webhooks.ownership().leaseWrites, at: performance.now() }
  const seconds = (after.at - before.at) / 1000
  const cpu = process.cpuUsage(before.cpu)
  const bucketWrites = (after.revision - before.revision) / seconds
  const leaseWrites = (after.leaseWrites - before.leaseWrites) / seconds
  // Every third of the lease: one renewal per shard and the presence key.
  const bound = ((LEASE_SHARDS + 1) / (LEASE_MS / 3)) * 1000
  t.comment(`idle with ${RENTALS} webhook rentals: ${bucketWrites.toFixed(1)} bucket writes/s, ${leaseWrites.toFixed(1)} of them the lease's (bound ${bound.toFixed(1)}/s at WEBHOOK_LEASE_MS=${LEASE_MS}, the default); process CPU ${((cpu.user + cpu.system) / 1000 / seconds).toFixed(1)} ms/s`)
  t.ok(leaseWrites <= bound * 1.25, `lease writes ${leaseWrites.toFixed(1)}/s within ${bound.toFixed(1)}/s`)
  t.ok(bucketWrites <= bound * 1.25, `and nothing else writes while idle: ${bucketWrites.toFixed(1)}/s`)
})
