import { basename } from 'node:path'
import t from 'tap'
import { connect } from '@nats-io/transport-node'
import type { Status } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import type { JetStreamManager } from '@nats-io/jetstream'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { openJetStreamLog } from '../../pipeline/log-jetstream.js'
import type { JetStreamLogOptions } from '../../pipeline/log-jetstream.js'
import type { SignalLog } from '../../pipeline/log.js'
import { logContract } from '../contracts/log-contract.js'

const WINDOW = 20 * 60_000

// One server for the file (a missing nats-server fails here, with the install command).
const server = await startNatsServer()
const node = server.nodes[0]!
const nc = await connect({ servers: node.url, reconnectTimeWait: 50, maxReconnectAttempts: -1, pingInterval: 1_000 })
const jsm = await jetstreamManager(nc)
t.teardown(async () => {
  await nc.close()
  await server.close()
})

const streams = new WeakMap<SignalLog, string>()

/** Each contract case gets its own stream and subjects, named after its folder. */
function streamOf(dir: string): string {
  return basename(dir).replace(/[^A-Za-z0-9_-]/g, '_')
}

async function open(stream: string, o: Partial<JetStreamLogOptions> = {}): Promise<SignalLog> {
  const log = await openJetStreamLog({ connection: nc, stream, subjectPrefix: `t.${stream}`, dedupWindowMs: WINDOW, requestTimeoutMs: 2_000, ...o })
  streams.set(log, stream)
  return log
}

/** Waits for the shared connection's next status of `type`. */
async function statusOf(type: Status['type']): Promise<void> {
  for await (const s of nc.status()) if (s.type === type) return
}

/** Removes the records before `beforeSeq` as size retention does (not a purge): max_msgs lowered, then lifted. */
async function trimBefore(jsm: JetStreamManager, stream: string, beforeSeq: number): Promise<void> {
  const info = await jsm.streams.info(stream)
  await jsm.streams.update(stream, { ...info.config, max_msgs: info.state.last_seq - beforeSeq + 1 })
  await jsm.streams.update(stream, { ...info.config, max_msgs: -1 })
}

logContract(t, 'jetstream', (dir) => open(streamOf(dir)), {
  expire: (log, beforeSeq) => trimBefore(jsm, streams.get(log)!, beforeSeq),
  makeUnavailable: async () => {
    const down = statusOf('disconnect')
    await node.stop()
    await down
    return async () => {
      const up = statusOf('reconnect')
      await node.restart()
      await up
      // JetStream answers a moment after the client reconnects.
      for (;;) {
        try {
          await jsm.streams.names().next()
          return
        } catch {
          await new Promise((r) => setTimeout(r, 50))
        }
      }
    }
  },
})

const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
let streamNo = 0

/** A log on a stream of its own, closed at teardown. */
async function own(t: Tap, o: Partial<JetStreamLogOptions> = {}): Promise<{ log: SignalLog; stream: string }> {
  const stream = `own-${process.pid}-${++streamNo}`
  const log = await open(stream, o)
  t.teardown(() => log.close())
  return { log, stream }
}
type Tap = Parameters<Parameters<typeof t.test>[0]>[0]

async function appendRange(log: SignalLog, from: number, to: number): Promise<void> {
  for (let i = from; i <= to; i++) await log.append(`r-${i}`, bytes(`record ${i} `.padEnd(200, '.')))
}

t.test('a purge behind an open consumer, which JetStream passes over silently, is told as lost', async (t) => {
  const { log, stream } = await own(t)
  await appendRange(log, 1, 30)
  const c = await log.consumer('purged')
  await c.fetch(5, 0)
  await c.ack(5)
  await jsm.streams.purge(stream, { seq: 20 })
  const got = await c.fetch(3, 0)
  t.same(got.lost, { fromSeq: 6, toSeq: 19, count: 14 })
  t.same(got.records.map((r) => r.seq), [20, 21, 22])
})

t.test('records removed by max_bytes are told as lost to the consumer behind them', async (t) => {
  const { log } = await own(t, { maxBytes: 8 * 1024 })
  await appendRange(log, 1, 10)
  const c = await log.consumer('small')
  await c.fetch(2, 0)
  await c.ack(2)
  await appendRange(log, 11, 80)
  const { firstSeq } = await log.info()
  t.ok(firstSeq > 3, `max_bytes removed records before ${firstSeq}`)
  const got = await c.fetch(1, 0)
  t.same(got.lost, { fromSeq: 3, toSeq: firstSeq - 1, count: firstSeq - 3 })
  t.same(got.records.map((r) => r.seq), [firstSeq])
})

t.test('records removed by max_age are told as lost, also to a filtered consumer that restarts', async (t) => {
  const { log, stream } = await own(t, { maxAgeMs: 300, dedupWindowMs: 200 })
  await appendRange(log, 1, 10)
  const c = await log.consumer('aged')
  await c.fetch(4, 0)
  await c.ack(4)
  await c.close()
  const f = await log.consumer('aged_filtered', { sourceId: 'src_a' })
  await f.close()
  // The server ages records out on a timer of its own.
  while ((await jsm.streams.info(stream)).state.messages > 0) await new Promise((r) => setTimeout(r, 50))
  await log.append('fresh', bytes('fresh'), { sourceId: 'src_a' })
  const again = await log.consumer('aged')
  const got = await again.fetch(10, 0)
  t.same(got.lost, { fromSeq: 5, toSeq: 10, count: 6 })
  t.same(got.records.map((r) => r.dedupId), ['fresh'])
  const filtered = await log.consumer('aged_filtered', { sourceId: 'src_a' })
  const mine = await filtered.fetch(10, 0)
  t.same(mine.lost, { fromSeq: 1, toSeq: 10, count: 10 })
  t.same(mine.records.map((r) => r.seq), [11])
})

t.test('a consumer closed while its fetch waited is reopened and handed what comes next at once', async (t) => {
  const { log } = await own(t)
  const c = await log.consumer('waits')
  const waiting = c.fetch(10, 20_000)
  await new Promise((r) => setTimeout(r, 30))
  await c.close()
  t.same(await waiting, { records: [], lost: null })
  const again = await log.consumer('waits')
  await log.append('next', bytes('n'))
  const started = performance.now()
  t.same((await again.fetch(10, 5_000)).records.map((r) => r.dedupId), ['next'], 'not taken by the closed consumer\'s request')
  t.ok(performance.now() - started < 2_000)
})

t.test('an append that timed out may have been stored: its retry with the same dedup id stores nothing twice', async (t) => {
  const { stream } = await own(t)
  // A 1 ms request timeout makes most appends of a burst time out after the publish left.
  const steady = await open(stream)
  let hasty: SignalLog | undefined
  // Opening asks the server too, so it may time out itself: it is tried until it gets through.
  while (hasty === undefined) hasty = await open(stream, { requestTimeoutMs: 2 }).catch(() => undefined)
  t.teardown(async () => {
    await hasty!.close()
    await steady.close()
  })
  const n = 500
  const results = await Promise.allSettled(Array.from({ length: n }, (_, i) => hasty!.append(`amb-${i}`, bytes(`amb ${i}`))))
  const failed = results.flatMap((r, i) => (r.status === 'rejected' ? [i] : []))
  t.ok(failed.length > 0, `${failed.length} of ${n} appends timed out`)
  t.equal(failed.filter((i) => (results[i] as PromiseRejectedResult).reason?.code !== 'unavailable').length, 0, 'every timeout is unavailable (transient)')
  await new Promise((r) => setTimeout(r, 200))
  const retried = await Promise.all(failed.map((i) => steady.append(`amb-${i}`, bytes(`amb ${i}`))))
  t.ok(retried.some((r) => r.duplicate), `${retried.filter((r) => r.duplicate).length} of the timed-out appends had been stored`)
  const records = await steady.read({ fromSeq: 1 }, 10_000)
  t.equal(records.length, n, 'each id stored once')
  t.equal(new Set(records.map((r) => r.dedupId)).size, n)
})

t.test('a server restarted mid-burst keeps every acknowledged append, and the errors meanwhile are unavailable', async (t) => {
  const { log } = await own(t)
  const acked = new Map<string, number>()
  const failed: string[] = []
  const otherErrors: unknown[] = []
  let restarted = false
  let next = 0
  const total = 3000
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < total) {
      const id = `burst-${next++}`
      try {
        acked.set(id, (await log.append(id, bytes(id))).seq)
      } catch (err) {
        if ((err as { code?: string }).code !== 'unavailable') otherErrors.push(err)
        failed.push(id)
        if (failed.length === 1) await new Promise((r) => setTimeout(r, 100))
      }
      if (!restarted && acked.size >= 500) {
        restarted = true
        await node.restart()
      }
    }
  }))
  t.ok(failed.length > 0, `${failed.length} appends failed during the restart`)
  t.same(otherErrors, [], 'each of them unavailable')
  // Retried with their ids: those the server stored before it went down come back as duplicates.
  for (;;) {
    try {
      for (const id of failed.splice(0)) acked.set(id, (await log.append(id, bytes(id))).seq)
      break
    } catch {
      await new Promise((r) => setTimeout(r, 100))
    }
  }
  const records = await log.read({ fromSeq: 1 }, 10_000)
  const bySeq = new Map(records.map((r) => [r.seq, r.dedupId]))
  let missing = 0
  for (const [id, seq] of acked) if (bySeq.get(seq) !== id) missing++
  t.equal(missing, 0, `all ${acked.size} acknowledged appends are there`)
  t.equal(records.length, total, 'and each once')
})

t.test('pipelined appends and fetch latency (figures, on a shared machine)', async (t) => {
  const { log } = await own(t)
  const data = new Uint8Array(1024).fill(0x61)
  for (const inFlight of [1, 256]) {
    const total = inFlight === 1 ? 2000 : 20_000
    let next = 0
    const started = performance.now()
    await Promise.all(Array.from({ length: inFlight }, async () => {
      while (next < total) {
        const i = next++
        await log.append(`tp-${inFlight}-${i}`, data)
      }
    }))
    t.comment(`jetstream appends: ${Math.round(total / ((performance.now() - started) / 1000))}/s at ${inFlight} in flight, 1 KiB, msgID, R1 file storage`)
  }
  const c = await log.consumer('latency')
  let batches = 0
  const started = performance.now()
  for (;;) {
    const got = await c.fetch(256, 0)
    if (got.records.length === 0) break
    await c.ack(got.records.at(-1)!.seq)
    batches++
  }
  t.comment(`jetstream fetch(256) + ack: ${((performance.now() - started) / batches).toFixed(2)} ms per batch over ${batches} batches`)
  const waiting = c.fetch(10, 5_000)
  const appended = performance.now()
  await log.append('wake', data)
  await waiting
  t.comment(`a waiting fetch woken by an append: ${(performance.now() - appended).toFixed(2)} ms after the append began`)
  t.equal(c.position(), 22_000)
})
