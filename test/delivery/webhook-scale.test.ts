import t from 'tap'
import { webhookIdOf } from '../../delivery/webhooks/webhook-event.js'
import { rentalOf, sharedReceiver, signalOf, until, webhookFixture } from '../helpers/webhook-fixture.js'

/**
 * Many webhook rentals cost a bounded amount while idle and an append reaches only the
 * rentals of its source: no log consumer, timer or log read per rental. 10,000 rentals
 * take about 10 s here on 2 cores at a load average of 2.4 (WEBHOOK_SCALE_RENTALS
 * scales it down); the bench's webhooks10k phase runs 10,000 through a real gateway.
 */

const RENTALS = Number(process.env['WEBHOOK_SCALE_RENTALS'] ?? 10_000)
const SOURCES = RENTALS / 10
const sourceOf = (i: number) => `src_${String(i % SOURCES).padStart(4, '0')}`
const rentals = Array.from({ length: RENTALS }, (_, i) => rentalOf(i, sourceOf(i)))
const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length

t.test(`${RENTALS} webhook rentals over ${SOURCES} sources: all delivered, with bounded resources`, async (t) => {
  t.setTimeout(240_000)
  const rx = await sharedReceiver(t)
  const timersBefore = timers()
  const s = await webhookFixture(t, rentals)
  await s.register(rx.base)
  await until(() => s.workers().running === RENTALS, 60_000)
  // Each loop reads the log once at its start (catching up), then waits on the tail.
  await until(() => s.logCounts.reads >= RENTALS, 60_000)
  await new Promise((r) => setTimeout(r, 300))
  const readsIdle = s.logCounts.reads
  t.ok(timers() - timersBefore < 20, `idle: ${timers() - timersBefore} timers more with ${RENTALS} loops running`)
  t.same((await s.journal.consumers()).map((c) => c.name), ['delivery-live'], 'one log consumer (the tail), none per rental')

  // One signal of one source: its 10 rentals receive it, no loop reads the log.
  await s.journal.append('one', signalOf(1, sourceOf(0)), { sourceId: sourceOf(0) })
  const ofSource0 = rentals.filter((r) => r.source_id === sourceOf(0))
  await until(() => rx.got.length >= ofSource0.length)
  await new Promise((r) => setTimeout(r, 200))
  t.same(rx.got.map((d) => d.path).sort(), ofSource0.map((r) => `/hook/${r.rental_id}`).sort(), 'only the rentals of that source were called')
  t.equal(s.logCounts.reads, readsIdle, 'no loop read the log: the tail handed the record to the ten loops')

  // One signal per source: every rental gets exactly its source's.
  const t0 = performance.now()
  for (let i = 0; i < SOURCES; i++) await s.journal.append(`all${i}`, signalOf(100 + i, sourceOf(i)), { sourceId: sourceOf(i) })
  await until(() => rx.got.length >= ofSource0.length + RENTALS, 120_000)
  const seconds = (performance.now() - t0) / 1000
  t.comment(`${RENTALS} deliveries in ${seconds.toFixed(2)} s (${Math.round(RENTALS / seconds)}/s); ${s.logCounts.reads - readsIdle} log reads`)
  const ids = new Set(rx.got.map((d) => d.id))
  t.equal(ids.size, rx.got.length, 'no event delivered twice')
  const missing = rentals.filter((r, i) => !ids.has(webhookIdOf(r.rental_id, 2 + (i % SOURCES))))
  t.equal(missing.length, 0, 'every rental got its source\'s signal')
  t.ok(s.logCounts.reads - readsIdle <= 10, 'the live deliveries read the log at most a few times')
  await until(async () => (await s.state.position(rentals[RENTALS - 1]!.rental_id)) !== null, 30_000)
  t.same(s.errors, [])
})
