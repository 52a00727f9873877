import t from 'tap'
import { QUEUE_LIMIT } from '../../delivery/webhooks/webhook-loop.js'
import { webhookIdOf } from '../../delivery/webhooks/webhook-event.js'
import { rentalOf, sharedReceiver, signalOf, until, webhookFixture } from '../helpers/webhook-fixture.js'

/**
 * Delivery state is written per run of events, never per event, and never ahead of
 * delivery: the rental's position stays below an event until it is delivered or
 * dead-lettered, whatever was delivered after the last write.
 */

const RENTAL = rentalOf(1, 'src_a')
const seqOf = (id: string) => Number(id.split('_').pop())

t.test('a burst of 300 events is delivered in order with a handful of state writes, not a few per event', async (t) => {
  const rx = await sharedReceiver(t)
  const s = await webhookFixture(t, [RENTAL])
  await s.register(rx.base)
  for (let i = 1; i <= 300; i++) await s.journal.append(`b${i}`, signalOf(i, 'src_a'), { sourceId: 'src_a' })
  await until(() => rx.got.length >= 300)
  await until(async () => (await s.state.position(RENTAL.rental_id))?.seq === 300)
  t.same(rx.got.map((d) => seqOf(d.id)), Array.from({ length: 300 }, (_, i) => i + 1), 'every event once, in log order')
  const w = Object.fromEntries(s.writes)
  t.ok((w['position'] ?? 0) <= 15, `position written ${w['position']} times for 300 events`)
  t.ok((w['attempts'] ?? 0) <= 15, `attempts written ${w['attempts']} times for 300 events`)
  t.ok((w['endpoint'] ?? 0) <= 3, `endpoint written ${w['endpoint']} times (registration and the first success)`)
  t.notOk(w['pending'], 'no retry state is written while every attempt succeeds')
  const deliveries = await s.state.attempts(RENTAL.rental_id)
  t.equal(deliveries.length, 100, 'the attempts list keeps its newest 100')
  t.equal(deliveries[0]!.event_id, '300', 'newest first')
  t.equal((await s.state.endpoint(RENTAL.rental_id))?.last_success_at !== null, true, 'the endpoint says it succeeded')
  t.same(s.errors, [])
})

t.test('the position never passes an event that is not delivered: a failing event holds it, a restart resumes at it with the same webhook-id', async (t) => {
  let failing = true
  const rx = await sharedReceiver(t, (_req, res, d) => res.writeHead(seqOf(d.id) === 4 && failing ? 500 : 204).end())
  const s = await webhookFixture(t, [RENTAL], { retryDelaysMs: [200], checkpointMs: 20 })
  await s.register(rx.base)
  for (let i = 1; i <= 5; i++) await s.journal.append(`p${i}`, signalOf(i, 'src_a'), { sourceId: 'src_a' })
  // Other sources' records while 4 fails: checkpoints must not move the position past 4 either.
  for (let i = 0; i < 1100; i++) await s.journal.append(`q${i}`, signalOf(1000 + i, 'src_b'), { sourceId: 'src_b' })
  await until(() => rx.got.filter((d) => seqOf(d.id) === 4).length >= 2)
  await new Promise((r) => setTimeout(r, 100))
  // The failure wrote the run before it (1 to 3) and the retry state; never past 3.
  t.equal((await s.state.position(RENTAL.rental_id))?.seq, 3, 'events 1 to 3 are done with; 4 is not')
  t.equal((await s.state.pending(RENTAL.rental_id))?.seq, 4, 'the retry state names event 4')
  await s.restart()
  const afterRestart = rx.got.length
  await until(() => rx.got.length > afterRestart)
  t.equal(rx.got[afterRestart]!.id, webhookIdOf(RENTAL.rental_id, 4), 'the restarted loop goes on with event 4, same webhook-id')
  t.equal((await s.state.position(RENTAL.rental_id))?.seq, 3, 'still held at 3 while 4 fails')
  failing = false
  await until(() => rx.got.some((d) => seqOf(d.id) === 5))
  const ids = rx.got.map((d) => seqOf(d.id))
  t.same([...new Set(ids)], [1, 2, 3, 4, 5], 'in order, nothing before 4 re-sent after the restart')
  t.same(ids.slice(afterRestart).filter((n) => n < 4), [], 'events 1 to 3 were not sent again')
  await until(async () => ((await s.state.position(RENTAL.rental_id))?.seq ?? 0) >= 5)
  await until(async () => (await s.state.pending(RENTAL.rental_id)) === null)
  t.pass('position past 5 and no retry state once 4 and 5 are delivered')
  t.same(s.errors, [])
})

t.test('a dead-lettered event is written as such before the position passes it', async (t) => {
  const rx = await sharedReceiver(t, (_req, res, d) => res.writeHead(seqOf(d.id) === 1 ? 500 : 204).end())
  const s = await webhookFixture(t, [RENTAL], { retryWindowMs: 100 })
  await s.register(rx.base)
  await s.journal.append('x1', signalOf(1, 'src_a'), { sourceId: 'src_a' })
  await s.journal.append('x2', signalOf(2, 'src_a'), { sourceId: 'src_a' })
  await until(async () => (await s.state.position(RENTAL.rental_id))?.seq === 2)
  const dead = await s.state.deadLetters(RENTAL.rental_id)
  t.same(dead.map((d) => d.seq), [1], 'event 1 is a dead letter')
  t.ok(rx.got.some((d) => seqOf(d.id) === 2), 'event 2 was delivered after it')
  t.same(s.errors, [])
})

t.test(`a loop whose queue overflows (more than ${QUEUE_LIMIT} records waiting) reads the log instead and misses nothing`, async (t) => {
  let release: (() => void) | undefined
  const held = new Promise<void>((r) => (release = r))
  const rx = await sharedReceiver(t, (_req, res, d) => {
    // The first delivery hangs until the records are all appended, so the tail's records pile up.
    if (seqOf(d.id) === 1) void held.then(() => res.writeHead(204).end())
    else res.writeHead(204).end()
  })
  const s = await webhookFixture(t, [RENTAL], { timeoutMs: 30_000 })
  await s.register(rx.base)
  const total = QUEUE_LIMIT + 600
  await s.journal.append('o1', signalOf(1, 'src_a'), { sourceId: 'src_a' })
  await until(() => rx.got.length >= 1)
  const readsBefore = s.logCounts.reads
  for (let i = 2; i <= total; i++) await s.journal.append(`o${i}`, signalOf(i, 'src_a'), { sourceId: 'src_a' })
  await s.journal.append('other', signalOf(0, 'src_b'), { sourceId: 'src_b' })
  await until(() => s.tail.position >= total + 1)
  release!()
  await until(() => new Set(rx.got.map((d) => d.id)).size >= total, 60_000)
  const ids = rx.got.map((d) => seqOf(d.id))
  t.same(ids, Array.from({ length: total }, (_, i) => i + 1), 'every event exactly once, in order')
  t.ok(s.logCounts.reads > readsBefore, 'the loop read the log itself after its queue was dropped')
  t.same(s.errors, [])
})

t.test('a position kept by an earlier release in the rental\'s own log consumer is taken over, and the consumer removed', async (t) => {
  const rx = await sharedReceiver(t)
  const s = await webhookFixture(t, [RENTAL])
  for (let i = 1; i <= 5; i++) await s.journal.append(`l${i}`, signalOf(i, 'src_a'), { sourceId: 'src_a' })
  const legacy = await s.journal.consumer(`webhook-${RENTAL.rental_id}`, { sourceId: 'src_a', startSeq: 1 })
  await legacy.fetch(3, 0)
  await legacy.ack(3)
  await legacy.close()
  const at = new Date().toISOString()
  await s.state.modifyEndpoint(RENTAL.rental_id, () => ({ rental_id: RENTAL.rental_id, url: `${rx.base}/hook/${RENTAL.rental_id}`, start_seq: 1, created_at: at, updated_at: at, state: 'enabled', disabled_reason: null, disabled_at: null, last_success_at: null, failing_since: null }))
  await until(() => rx.got.length >= 2)
  await until(async () => (await s.journal.consumerInfo(`webhook-${RENTAL.rental_id}`)) === null)
  t.same(rx.got.map((d) => seqOf(d.id)), [4, 5], 'delivery resumed after the consumer\'s acknowledged 3')
  await until(async () => (await s.state.position(RENTAL.rental_id))?.seq === 5)
  t.same(s.errors, [])
})

t.test('an idle rental\'s stored position follows the tail at checkpoints and at a clean stop, so a restart has little to read again', async (t) => {
  const rx = await sharedReceiver(t)
  const s = await webhookFixture(t, [RENTAL], { checkpointMs: 50 })
  await s.register(rx.base)
  for (let i = 0; i < 1500; i++) await s.journal.append(`c${i}`, signalOf(i, 'src_b'), { sourceId: 'src_b' })
  await until(async () => ((await s.state.position(RENTAL.rental_id))?.seq ?? 0) >= 1500)
  t.pass('a checkpoint stored the tail\'s position for a rental that received nothing')
  for (let i = 0; i < 10; i++) await s.journal.append(`d${i}`, signalOf(2000 + i, 'src_b'), { sourceId: 'src_b' })
  await until(() => s.tail.position >= 1510)
  await s.restart()
  t.equal((await s.state.position(RENTAL.rental_id))?.seq, 1510, 'a clean stop stores the tail\'s position (fewer than a checkpoint\'s 1,024 records past the last)')
  await s.journal.append('own', signalOf(9, 'src_a'), { sourceId: 'src_a' })
  await until(() => rx.got.length >= 1)
  t.same(rx.got.map((d) => seqOf(d.id)), [1511], 'the rental\'s own signal is delivered after the restart')
  t.same(s.errors, [])
})
