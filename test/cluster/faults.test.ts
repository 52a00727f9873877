import { randomBytes } from 'node:crypto'
import { jetstreamManager } from '@nats-io/jetstream'
import { connect } from '@nats-io/transport-node'
import t, { type Test } from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startNatsCluster, startNatsServer } from '../../harness/nats-launcher.js'
import { payload, provision, push, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * Gateways on a three-node nats-server cluster (R3 streams and buckets), through faults:
 * the signal stream's leader killed mid-burst, and a gateway killed with kill -9
 * mid-burst. The client retries what was not answered 202 with a fresh nonce through
 * either gateway, as a creator's client does; the rule checked is that every signal ends
 * with a 202 and is in the log exactly once, and that nothing but 503 (retry) is answered
 * meanwhile.
 */

const SIGNALS = 150
const WORKERS = 6
/** How long one signal may take to get its 202 through the faults, retries included. */
const SIGNAL_DEADLINE_MS = 60_000

const cluster = await startNatsCluster()
t.teardown(() => cluster.close())
const adminToken = randomBytes(24).toString('hex')
/**
 * JetStream reserves a stream's max_bytes on each replica's server when it is placed: the
 * default retention (32 GiB) for the stream of each test would outgrow this machine's disk.
 */
const RETENTION = { JOURNAL_RETENTION_MAX_BYTES: String(256 * 1024 * 1024) }

interface Burst {
  /** signal_id → the received_at of its 202 (every retry's 202 must agree). */
  readonly accepted: Map<string, string>
  /** Answers other than 202 and 503, by status and code: must stay empty. */
  readonly unexpected: string[]
  retried: number
}

/**
 * Pushes SIGNALS signals over the gateways still running (round robin), WORKERS at a time;
 * `fault` runs once a third of them are answered. A 503 or a connection error is retried
 * with a fresh nonce on the next gateway.
 */
async function burst(src: Provisioned, gateways: LaunchedGateway[], fault: () => Promise<void>): Promise<Burst> {
  const result: Burst = { accepted: new Map(), unexpected: [], retried: 0 }
  const live = () => gateways.filter((g) => g.proc.exitCode === null && g.proc.signalCode === null)
  let next = 0
  let turn = 0
  let faulted: Promise<void> | undefined
  const worker = async () => {
    while (next < SIGNALS) {
      const body = payload(src.sourceId, { signal_id: `sig_fault_${next++}` })
      const deadline = Date.now() + SIGNAL_DEADLINE_MS
      for (;;) {
        const gw = live()[turn++ % live().length]!
        const res = await push(gw, src.sign(body)).catch(() => undefined)
        if (res?.status === 202) {
          const first = result.accepted.get(String(body['signal_id']))
          if (first !== undefined && first !== res.body.received_at) result.unexpected.push(`${String(body['signal_id'])}: two receipt times`)
          result.accepted.set(String(body['signal_id']), res.body.received_at)
          break
        }
        if (res !== undefined && res.status !== 503) {
          result.unexpected.push(`${res.status} ${res.body?.error?.code}`)
          break
        }
        if (Date.now() > deadline) {
          result.unexpected.push(`${String(body['signal_id'])}: no 202 within ${SIGNAL_DEADLINE_MS} ms`)
          break
        }
        result.retried++
        await new Promise((r) => setTimeout(r, 100))
      }
      if (faulted === undefined && result.accepted.size >= SIGNALS / 3) faulted = fault()
    }
  }
  await Promise.all(Array.from({ length: WORKERS }, worker))
  await faulted
  return result
}

async function storedSignalIds(stream: string, urls = cluster.urls): Promise<string[]> {
  const nc = await connect({ servers: urls.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 50 })
  try {
    const jsm = await jetstreamManager(nc)
    const info = await jsm.streams.info(stream)
    const ids: string[] = []
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const msg = await jsm.streams.getMessage(stream, { seq })
      if (msg !== null) ids.push(JSON.parse(new TextDecoder().decode(msg.data)).signal_id)
    }
    return ids
  } finally {
    await nc.close()
  }
}

/** Until every replica of `stream` is current again, as after a restarted node caught up. */
async function untilCaughtUp(stream: string): Promise<void> {
  const nc = await connect({ servers: cluster.urls.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 50 })
  try {
    const jsm = await jetstreamManager(nc)
    const deadline = Date.now() + 30_000
    for (;;) {
      const info = await jsm.streams.info(stream).catch(() => undefined)
      const replicas = info?.cluster?.replicas ?? []
      if (info?.cluster?.leader !== undefined && replicas.length === 2 && replicas.every((r) => r.current)) return
      if (Date.now() > deadline) throw new Error(`${stream}: replicas not current after 30 s`)
      await new Promise((r) => setTimeout(r, 200))
    }
  } finally {
    await nc.close()
  }
}

function checkOnce(t: Test, result: Burst, stored: string[]): void {
  t.same(result.unexpected.slice(0, 10), [], `only 202 and 503 were answered, and every signal got its 202 (${result.unexpected.length} otherwise)`)
  t.equal(result.accepted.size, SIGNALS, `all ${SIGNALS} signals accepted`)
  const faultIds = stored.filter((id) => id.startsWith('sig_fault_'))
  t.equal(faultIds.length, new Set(faultIds).size, 'no signal stored twice')
  t.same(new Set(faultIds), new Set(result.accepted.keys()), 'every accepted signal is in the log, and nothing else')
  t.comment(`${result.retried} retries`)
}

t.test('the signal stream leader killed mid-burst: every signal accepted once, through both gateways', async (t) => {
  const env = { NATS_URL: cluster.urls, NATS_REPLICAS: '3', NATS_STREAM: 'LEADER', ROLE: 'gateway', ADMIN_TOKEN: adminToken, ...RETENTION }
  const gateways = await Promise.all([startTestGateway(t, { env, adminToken }), startTestGateway(t, { env, adminToken })])
  const src = await provision(gateways[0]!)
  t.teardown(() => {
    // What the gateways logged at error level, to read beside a failure.
    for (const gw of gateways) for (const line of gw.output.filter((l) => l.includes('"level":50')).slice(0, 3)) t.comment(line.slice(0, 1500))
  })
  const result = await burst(src, gateways, async () => {
    const nc = await connect({ servers: cluster.urls.split(',') })
    const leader = (await (await jetstreamManager(nc)).streams.info('LEADER')).cluster?.leader ?? ''
    await nc.close()
    t.match(leader, /^n[123]$/, `the stream leader ${leader} is killed`)
    const node = cluster.nodes[Number(leader.slice(1)) - 1]!
    await node.kill()
    t.teardown(() => (node.running() ? undefined : node.restart()))
  })
  // Back to three nodes before reading the stream: a read meanwhile may meet the elections.
  for (const node of cluster.nodes) if (!node.running()) await node.restart()
  await untilCaughtUp('LEADER')
  checkOnce(t, result, await storedSignalIds('LEADER'))
})

t.test('a gateway killed with kill -9 mid-burst: the other takes the retries, every signal accepted once', async (t) => {
  const env = { NATS_URL: cluster.urls, NATS_REPLICAS: '3', NATS_STREAM: 'GATEWAY_KILL', ROLE: 'gateway', ADMIN_TOKEN: adminToken, ...RETENTION }
  const gateways = await Promise.all([startTestGateway(t, { env, adminToken }), startTestGateway(t, { env, adminToken })])
  const src = await provision(gateways[0]!)
  const result = await burst(src, gateways, () => gateways[0]!.kill())
  t.ok(gateways[0]!.proc.signalCode === 'SIGKILL', 'the first gateway was killed')
  checkOnce(t, result, await storedSignalIds('GATEWAY_KILL'))
})

t.test('the one nats-server restarted mid-burst: 503 while it is down, then every signal accepted once, with no gateway restarted', async (t) => {
  const single = await startNatsServer()
  t.teardown(() => single.close())
  const env = { NATS_URL: single.urls, NATS_STREAM: 'RESTART', ROLE: 'gateway', ADMIN_TOKEN: adminToken, ...RETENTION }
  const gateways = await Promise.all([startTestGateway(t, { env, adminToken }), startTestGateway(t, { env, adminToken })])
  const src = await provision(gateways[0]!)
  const node = single.nodes[0]!
  const result = await burst(src, gateways, async () => {
    await node.stop()
    await new Promise((r) => setTimeout(r, 1_000))
    await node.restart()
  })
  t.ok(result.retried > 0, 'some pushes met the outage and were retried')
  t.ok(gateways.every((g) => g.proc.exitCode === null), 'both gateways kept running')
  checkOnce(t, result, await storedSignalIds('RESTART', single.urls))
})
