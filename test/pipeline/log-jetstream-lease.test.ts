import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { connect } from '@nats-io/transport-node'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { openJetStreamLog } from '../../pipeline/log-jetstream.js'
import { openLeasedConsumer, type FetchResult, type LeasedConsumer } from '../../pipeline/index.js'
import { fileKvBuckets } from '../../storage/index.js'
import { cuttable } from '../helpers/cuttable-bucket.js'

/**
 * One active puller per JetStream durable across processes: two "processes" (each with
 * its own NATS connection, its own log and its own view of the lease bucket) open the
 * same AckPolicy.All durable through the lease. The holder is killed mid-stream (its
 * connection closed and its bucket cut, nothing released); the standby takes over after
 * the lease lapses and resumes from the acknowledged position.
 */

// Long enough that a loaded machine still renews in time: a late renewal would take the standby's lease too.
const LEASE_MS = 1500
const RECORDS = 400

t.test('a standby takes a killed holder\'s durable over: every record processed at least once, nothing acknowledged handed out again, nothing reported lost', async (t) => {
  const server = await startNatsServer()
  const dir = await mkdtemp(join(tmpdir(), 'js-lease-'))
  const bucket = await fileKvBuckets({ dir })('leases', { maxKeys: 100, maxValueBytes: 1024 })
  const [ncA, ncB, ncP] = await Promise.all([0, 1, 2].map(() => connect({ servers: server.nodes[0]!.url, maxReconnectAttempts: 0 })))
  t.teardown(async () => {
    await Promise.all([ncA, ncB, ncP].map((nc) => nc!.close().catch(() => undefined)))
    await bucket.close()
    await server.close()
    await rm(dir, { recursive: true, force: true })
  })
  const options = { stream: 'leased', dedupWindowMs: 60_000, requestTimeoutMs: 2_000 }
  const producer = await openJetStreamLog({ connection: ncP!, ...options })
  const logA = await openJetStreamLog({ connection: ncA!, ...options })
  const logB = await openJetStreamLog({ connection: ncB!, ...options })
  t.teardown(() => Promise.all([producer.close(), logA.close(), logB.close()]))
  const viewA = cuttable(bucket)

  // Records keep coming throughout, 10 every 10 ms.
  const appending = (async () => {
    for (let i = 1; i <= RECORDS; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, k) => producer.append(`r${i + k}`, Buffer.from(`record ${i + k}`))))
      await new Promise((r) => setTimeout(r, 10))
    }
  })()

  const a = await openLeasedConsumer(logA, viewA, 'recorder', undefined, { mode: 'refuse', leaseMs: LEASE_MS, holderId: 'host-a/1' })
  let bOpenedAt = 0
  const standby = openLeasedConsumer(logB, bucket, 'recorder', undefined, { mode: 'wait', leaseMs: LEASE_MS, holderId: 'host-b/2' }).then((c) => {
    bOpenedAt = performance.now()
    return c
  })
  const processed = new Map<number, number>()
  const lost: FetchResult['lost'][] = []
  const handedA: number[] = []
  let ackedA = 0
  let killedAt = 0

  /** Processes batches, acknowledging each but the one under way when the holder dies. */
  const run = async (c: LeasedConsumer, handed: number[], stopAt: () => boolean, onBatch?: () => Promise<void>) => {
    while (!stopAt()) {
      const batch = await c.fetch(20, 200)
      if (batch.lost !== null) lost.push(batch.lost)
      for (const r of batch.records) {
        handed.push(r.seq)
        processed.set(r.seq, (processed.get(r.seq) ?? 0) + 1)
      }
      await onBatch?.()
      if (batch.records.length > 0) await c.ack(batch.records.at(-1)!.seq)
      if (c === a) ackedA = Math.max(ackedA, c.position())
    }
  }
  await run(a, handedA, () => handedA.length >= 150, async () => {
    if (handedA.length < 150) return
    // Killed between processing a batch and acknowledging it: no release, no more renewals.
    killedAt = performance.now()
    viewA.cut()
    await ncA!.close()
  }).catch(() => undefined)
  t.ok(killedAt > 0, `the holder was killed after ${handedA.length} records, ${ackedA} acknowledged`)
  t.ok(handedA.at(-1)! > ackedA, 'with records processed and not acknowledged')

  const b = await standby
  t.teardown(() => b.close())
  const handedB: number[] = []
  await appending
  await run(b, handedB, () => [...Array(RECORDS).keys()].every((i) => processed.has(i + 1)))
  t.comment(`the standby opened the durable ${Math.round(bOpenedAt - killedAt)} ms after the holder was killed (lease ${LEASE_MS} ms)`)
  t.ok(bOpenedAt - killedAt >= LEASE_MS / 3, 'not before the holder\'s lease could lapse')

  t.same([...Array(RECORDS).keys()].filter((i) => !processed.has(i + 1)), [], 'every record processed at least once')
  t.same(lost, [], 'nothing reported lost')
  t.equal(handedB[0], ackedA + 1, 'the standby starts right after the holder\'s last acknowledgement')
  t.same(handedB.filter((s) => s <= ackedA), [], 'no acknowledged record handed out again')
  t.same(handedB, [...Array(handedB.length).keys()].map((i) => handedB[0]! + i), 'the standby gets every record after that once, in order')
  const twice = [...processed].filter(([, n]) => n > 1).map(([s]) => s)
  t.same(twice, handedA.filter((s) => s > ackedA), `processed twice: only what the holder processed and did not acknowledge (${twice.length})`)
  t.equal((await logB.consumerInfo('recorder'))?.ackSeq, RECORDS)
})
