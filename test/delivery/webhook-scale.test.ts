import t from 'tap'
import { webhookIdOf } from '../../delivery/webhooks/webhook-event.js'
import { rentalOf, sharedReceiver, signalOf, until, webhookFixture } from '../helpers/webhook-fixture.js'

/**
 * Many webhook rentals cost a bounded amount while idle and an append reaches only the
 * rentals of its source: no log consumer, timer or log read per rental. Every check is
 * against the count, so 2,000 rentals show it as well as more would (10,000 took 46 s
 * alone and over 3 minutes beside the rest of the suite, most of it tap's promise tracking
 * in this process). WEBHOOK_SCALE_RENTALS sets the
 * count; the bench's webhooks10k phase runs 10,000 through a real gateway.
 */

const RENTALS = Number(process.env['WEBHOOK_SCALE_RENTALS'] ?? 2_000)
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
  // Each endpoint starts at the log's next record, where the tail was when its loop began
  // listening: the loops have nothing to read from the log and wait on the tail.
  await until(() => s.workers().waiting === RENTALS, 60_000)
  const readsIdle = s.logCounts.reads
  t.equal(readsIdle, 0, `${RENTALS} loops started with no read of the log`)
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
  // Every rental's own event, by id: a count would be met early by the repeats of a loaded machine.
  const expected = rentals.map((r, i) => webhookIdOf(r.rental_id, 2 + (i % SOURCES)))
  await until(() => {
    const got = new Set(rx.got.map((d) => d.id))
    return expected.every((id) => got.has(id))
  }, 120_000)
  const seconds = (performance.now() - t0) / 1000
  t.comment(`${RENTALS} deliveries in ${seconds.toFixed(2)} s (${Math.round(RENTALS / seconds)}/s); ${s.logCounts.reads - readsIdle} log reads`)
  const ids = new Set(rx.got.map((d) => d.id))
  // At least once: a repeat is only the retry of an attempt that failed here (on a loaded
  // machine a request can outlast the fixture's 2 s timeout after the receiver took it).
  const failedAttempts = s.results.filter((r) => r !== 'delivered').length
  t.ok(rx.got.length - ids.size <= failedAttempts, `${rx.got.length - ids.size} repeats, each the retry of one of ${failedAttempts} failed attempts`)
  t.equal(expected.filter((id) => !ids.has(id)).length, 0, 'every rental got its source\'s signal')
  t.ok(s.logCounts.reads - readsIdle <= 10, 'the live deliveries read the log at most a few times')
  await until(async () => (await s.state.position(rentals[RENTALS - 1]!.rental_id)) !== null, 30_000)
  // Every loop back at the tail: none still waiting to retry an attempt that failed (on a
  // loaded machine some do, and a loop stopped mid-retry has records to read again).
  await until(() => s.workers().waiting === RENTALS, 60_000)

  // A clean restart: every loop stored the tail's position, so none has anything to read again.
  await s.restart()
  await until(() => s.workers().waiting === RENTALS, 60_000)
  t.equal(s.workers().catchUpReads, 0, 'after a clean restart the loops read nothing from the log')
  await s.journal.append('after', signalOf(9, sourceOf(0)), { sourceId: sourceOf(0) })
  const next = ofSource0.map((r) => webhookIdOf(r.rental_id, SOURCES + 2))
  await until(() => {
    const got = new Set(rx.got.map((d) => d.id))
    return next.every((id) => got.has(id))
  }, 30_000)
  t.pass('the rentals of a source receive its next signal after the restart')
  t.same(s.errors, [])
})

t.test('loops resuming from the same position share their catch-up reads: each record is read about once, not once per rental', async (t) => {
  // Many loops over many sources, a few chunks behind: 6,000 deliveries show the sharing
  // (one read per loop per chunk would be 1,500 reads) without a long run of deliveries.
  const count = 500
  const sources = 250
  const behind = 3000
  const some = Array.from({ length: count }, (_, i) => rentalOf(i, `src_${i % sources}`))
  const rx = await sharedReceiver(t)
  const s = await webhookFixture(t, some)
  for (let i = 0; i < behind; i++) await s.journal.append(`b${i}`, signalOf(i, `src_${i % sources}`), { sourceId: `src_${i % sources}` })
  await s.register(rx.base, some, 1)
  const expected = count * (behind / sources)
  await until(() => rx.got.length >= expected, 120_000)
  await until(() => s.workers().waiting === count, 30_000)
  const chunks = Math.ceil(behind / 1024)
  t.equal(new Set(rx.got.map((d) => d.id)).size, expected, `all ${expected} events delivered once`)
  t.ok(s.logCounts.reads <= chunks * 4, `${s.logCounts.reads} log reads for ${count} loops ${behind} records behind (${chunks} chunks; one read per loop per chunk would be ${count * chunks})`)
  t.same(s.errors, [])
})
