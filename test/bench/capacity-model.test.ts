import t from 'tap'
import { plan, type MeasuredRates, type ModelAssumptions } from '../../bench/cluster/capacity-model.js'

/**
 * The cluster benchmark's capacity model: process counts are the target over one
 * process's measured rate, rounded up; the log is split into at least as many streams as
 * recorders (one active recorder per durable consumer); the NATS servers hold every
 * stream's replicas and dedup state; the bounds are ordered most binding first.
 */

const measured: MeasuredRates = {
  gatewayPerProcess: 5_000,
  recorderPerProcess: 20_000,
  deliveryEventsPerProcess: 50_000,
  streamLeaderPerCore: 40_000,
  natsBytesPerSignalHeld: 200,
  clickhouseInsertUsPerReceipt: 30,
}
const assumptions: ModelAssumptions = { fanOut: 10, dedupWindowS: 1800, replicas: 3, natsMemoryBytes: 32 * 2 ** 30, clickhouseInsertCores: 16 }

t.test('counts are the target over one process of each kind, rounded up', async (t) => {
  const p = plan(100_000, measured, assumptions)
  t.equal(p.gateways, 20)
  t.equal(p.recorders, 5)
  t.equal(p.delivery, 20, '100,000 signals × 10 events over 50,000 events/s a process')
  t.equal(p.signalStreams, 5, 'as many streams as recorders, more than the leader bound (3)')
  t.equal(p.clickhouseInsertCores, 3)
})

t.test('past one server\'s memory, the dedup state decides the NATS servers; the bounds come most binding first', async (t) => {
  const p = plan(1_000_000, measured, assumptions)
  // 1M/s × 1800 s × 200 B = 360 GB per copy, 3 copies, 32 GiB a server.
  t.equal(p.signalStreams, 50)
  t.ok(p.natsServers >= Math.ceil((1e6 * 1800 * 200 * 3) / (32 * 2 ** 30)), `${p.natsServers} servers`)
  t.ok(p.dedupBytesPerServer <= 32 * 2 ** 30, 'no server holds more than its memory')
  // 50 recorders' worth, 25 stream leaders', 10.5 servers' memory, 1.9 ClickHouse servers'.
  t.same(p.bounds.map((b) => Number(b.ratio.toFixed(1))), [50, 25, 10.5, 1.9])
  t.equal(p.bounds[0]!.what, 'one recorder (one durable consumer)')
  for (let i = 1; i < p.bounds.length; i++) t.ok(p.bounds[i - 1]!.ratio >= p.bounds[i]!.ratio, 'most binding first')
})

t.test('a small target needs one of each and three NATS servers', async (t) => {
  const p = plan(1_000, measured, assumptions)
  t.same([p.gateways, p.recorders, p.delivery, p.signalStreams, p.natsServers], [1, 1, 1, 1, 3])
})
