import t from 'tap'
import { StatusFigures, STATUS_FIGURES_COMPUTING_MAX } from '../../gateway/control/status-figures.js'
import { uptimeSpan, UPTIME_WINDOW_HOURS } from '../../gateway/control/source-status.js'
import { receiptIdOf } from '../../receipts/index.js'
import { chdbFolder, receiptInput } from '../helpers/receipts.js'

const HOUR = 3_600_000
const folder = await chdbFolder(t)
const store = await folder.open()
const base = Date.UTC(2030, 0, 10, 0, 0, 0)
const at = (hours: number, minutes = 0) => new Date(base + hours * HOUR + minutes * 60_000).toISOString()

t.test('figures: counts by folded outcome, the newest received_at and distinct hours with signals within the span, test receipts and dispute-only rows left out', async (t) => {
  const source = 'stats-src'
  await store.record([
    receiptInput(1, { source_id: source, received_at: at(0, 5) }),
    receiptInput(2, { source_id: source, received_at: at(0, 55) }),
    receiptInput(3, { source_id: source, received_at: at(2, 1) }),
    receiptInput(4, { source_id: source, received_at: at(5, 30) }),
    // A test receipt in an hour of its own and newest of all: in no figure.
    receiptInput(5, { source_id: source, received_at: at(3, 0), test: true }),
    // Another source's receipt: not this one's.
    receiptInput(6, { source_id: 'stats-other', received_at: at(4, 0) }),
  ])
  // A dispute about a signal never recorded writes a row of its own: no receipt, in no count.
  await store.recordDisputeStatuses([{ source_id: source, signal_id: 'never-recorded', emitted_at: at(1), dispute_status: 'open', changed_at: at(1) }])
  const id = (n: number) => receiptIdOf(source, receiptInput(n).signal_id)
  const verdict = (n: number, outcome: 'hit' | 'miss' | 'void', scoredHours: number) => ({ receipt_id: id(n), window_start: at(0), window_end: at(1), baseline: 1, outcome, scored_at: at(scoredHours) })
  t.same((await store.recordOutcomes([verdict(1, 'hit', 6), verdict(2, 'miss', 6), verdict(3, 'hit', 6)])).accepted, 3)
  // Receipt 2 corrected later to void; receipt 1 given an older verdict, which loses.
  await store.recordOutcomes([verdict(2, 'void', 7), verdict(1, 'miss', 1)])

  const whole = await store.sourceStats(source, { fromMs: base, toMs: base + 6 * HOUR })
  t.same(whole.outcomes, { pending: 1, hit: 2, miss: 0, void: 1 })
  t.equal(whole.lastReceivedMs, Date.parse(at(5, 30)))
  t.equal(whole.hoursWithSignals, 3, 'hours 0 (two signals), 2 and 5; the test receipt’s hour 3 is not one')
  // The span bounds only the hours: [1h, 5h) holds hour 2 alone; [5h, 6h) hour 5.
  t.equal((await store.sourceStats(source, { fromMs: base + HOUR, toMs: base + 5 * HOUR })).hoursWithSignals, 1)
  t.equal((await store.sourceStats(source, { fromMs: base + 5 * HOUR, toMs: base + 6 * HOUR })).hoursWithSignals, 1)
  t.same((await store.sourceStats(source, { fromMs: base + HOUR, toMs: base + 5 * HOUR })).outcomes, whole.outcomes, 'counts are over all time')

  const none = await store.sourceStats('stats-nobody', { fromMs: base, toMs: base + HOUR })
  t.same(none, { outcomes: { pending: 0, hit: 0, miss: 0, void: 0 }, lastReceivedMs: null, hoursWithSignals: 0 })
  await t.rejects(store.sourceStats(source, { fromMs: -1, toMs: 0 }), { code: 'invalid_argument' })
})

t.test('activity: receipts counted per bucket of emitted_at by severity and by folded outcome, every bucket of the window listed, test receipts and dispute-only rows left out', async (t) => {
  const source = 'activity-src'
  const MIN = 60_000
  await store.record([
    receiptInput(201, { source_id: source, emitted_at: at(0, 0), severity: 'info' }),
    receiptInput(202, { source_id: source, emitted_at: new Date(base + 59_999).toISOString(), severity: 'critical' }),
    receiptInput(203, { source_id: source, emitted_at: at(0, 2), severity: 'info' }),
    // Outside the window [0:00, 0:03): before it and at its end.
    receiptInput(204, { source_id: source, emitted_at: new Date(base - 1).toISOString() }),
    receiptInput(205, { source_id: source, emitted_at: at(0, 3) }),
    receiptInput(206, { source_id: source, emitted_at: at(0, 1), test: true }),
    receiptInput(207, { source_id: 'activity-other', emitted_at: at(0, 1) }),
  ])
  await store.recordDisputeStatuses([{ source_id: source, signal_id: 'never-recorded', emitted_at: at(0, 1), dispute_status: 'open', changed_at: at(0, 1) }])
  const id = receiptIdOf(source, receiptInput(202).signal_id)
  await store.recordOutcomes([{ receipt_id: id, window_start: at(0), window_end: at(1), baseline: 1, outcome: 'hit', scored_at: at(1) }])

  const minutes = await store.sourceActivity(source, { fromMs: base, toMs: base + 3 * MIN, bucket: 'minute' })
  t.same(minutes, [
    { startMs: base, total: 2, bySeverity: { info: 1, critical: 1 }, byOutcome: { pending: 1, hit: 1, miss: 0, void: 0 } },
    { startMs: base + MIN, total: 0, bySeverity: {}, byOutcome: { pending: 0, hit: 0, miss: 0, void: 0 } },
    { startMs: base + 2 * MIN, total: 1, bySeverity: { info: 1 }, byOutcome: { pending: 1, hit: 0, miss: 0, void: 0 } },
  ])
  const hours = await store.sourceActivity(source, { fromMs: base - HOUR, toMs: base + HOUR, bucket: 'hour' })
  t.same(hours.map((b) => [b.startMs, b.total]), [[base - HOUR, 1], [base, 4]])
  for (const bad of [
    { fromMs: base + 1, toMs: base + MIN, bucket: 'minute' as const },
    { fromMs: base, toMs: base, bucket: 'minute' as const },
    { fromMs: base, toMs: base + 1441 * MIN, bucket: 'minute' as const },
  ]) await t.rejects(store.sourceActivity(source, bad), { code: 'invalid_argument' }, JSON.stringify(bad))
})

t.test('the uptime span: whole hours from the hour of creation, at most 720 back, the hour under way left out', async (t) => {
  const now = base + 50 * HOUR + 17 * 60_000
  t.same(uptimeSpan(new Date(base + 47 * HOUR + 59 * 60_000).toISOString(), now), { fromMs: base + 47 * HOUR, toMs: base + 50 * HOUR })
  t.same(uptimeSpan(new Date(now - 60_000).toISOString(), now), { fromMs: base + 50 * HOUR, toMs: base + 50 * HOUR }, 'created this hour: no whole hour yet')
  t.same(uptimeSpan('2020-01-01T00:00:00.000Z', now), { fromMs: base + 50 * HOUR - UPTIME_WINDOW_HOURS * HOUR, toMs: base + 50 * HOUR })
})

t.test('status figures are computed once per source per TTL, shared by concurrent requests, and bounded in number at once', async (t) => {
  const source = 'cache-src'
  await store.record([receiptInput(100, { source_id: source, received_at: at(0) })])
  let clock = base
  let calls = 0
  const counting = new Proxy(store, {
    get(target, name, receiver) {
      if (name === 'sourceStats') {
        return (...args: Parameters<typeof store.sourceStats>) => {
          calls++
          return target.sourceStats(...args)
        }
      }
      const value = Reflect.get(target, name, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  const figures = new StatusFigures(counting, 15_000, () => clock)
  const span = { fromMs: base, toMs: base + HOUR }
  const [a, b] = await Promise.all([figures.get(source, span), figures.get(source, span)])
  t.equal(calls, 1, 'two requests at once, one query')
  t.same(a, b)
  t.equal(a.outcomes.pending, 1)
  await store.record([receiptInput(101, { source_id: source, received_at: at(0, 30) })])
  clock += 14_999
  t.equal((await figures.get(source, span)).outcomes.pending, 1, 'within the TTL: the kept answer')
  t.equal(calls, 1)
  clock += 1
  t.equal((await figures.get(source, span)).outcomes.pending, 2, 'past it: asked again')
  t.equal(calls, 2)
  t.equal((await figures.get(source, { fromMs: base, toMs: base + 2 * HOUR })).outcomes.pending, 2)
  t.equal(calls, 3, 'a new hour (another span) is asked again at once')

  const pending = Array.from({ length: STATUS_FIGURES_COMPUTING_MAX }, (_, i) => figures.get(`busy-${i}`, span))
  t.throws(() => figures.get('busy-extra', span), { code: 'overloaded', status: 503, retryAfter: 1 })
  await Promise.all(pending)
  await figures.get('busy-extra', span)
  t.pass('once they finished, a new one is computed')
})
