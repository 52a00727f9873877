import t from 'tap'
import { connect } from '@nats-io/transport-node'
import { jetstreamManager } from '@nats-io/jetstream'
import { startNatsCluster } from '../../harness/nats-launcher.js'
import { openJetStreamLog } from '../../pipeline/log-jetstream.js'
import { isLogError, type LogRecord } from '../../pipeline/index.js'

/**
 * The JetStream log on a three-node cluster with an R3 stream, its stream leader killed
 * (SIGKILL) in the middle of a burst of appends. Appends that fail are retried with the
 * same dedup id until they succeed, as the gateway's clients retry with the same body.
 * Afterwards every acknowledged append is stored exactly once at the seq its ack gave,
 * nothing is stored that was not acknowledged in the end, and every failure on the way
 * was the transient `unavailable`. The client is connected to the other two nodes, so what
 * is measured is the election, not a reconnect.
 */

const APPENDS = 3000
const IN_FLIGHT = 64
const KILL_AFTER = 1000
const RETRY_MS = 20

/** A read right after the election may find no leader for its short-lived consumer yet: it is `unavailable`, retried. */
async function retried<T>(run: () => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await run()
    } catch (err) {
      if (!isLogError(err, 'unavailable') || i >= 50) throw err
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

t.test('killing the stream leader mid-burst: every acknowledged append stored once, nothing stored unacknowledged, failures only unavailable', async (t) => {
  const cluster = await startNatsCluster()
  t.teardown(() => cluster.close())
  const setup = await connect({ servers: cluster.urls.split(','), maxReconnectAttempts: -1, reconnectTimeWait: 50 })
  t.teardown(() => setup.close())
  const options = { stream: 'ha', replicas: 3, dedupWindowMs: 10 * 60_000, requestTimeoutMs: 2_000 }
  await (await openJetStreamLog({ connection: setup, ...options })).close()
  const jsm = await jetstreamManager(setup)
  const leader = (await jsm.streams.info('ha')).cluster?.leader ?? ''
  t.match(leader, /^n[123]$/, `the stream leader is ${leader}`)
  const leaderNode = cluster.nodes[Number(leader.slice(1)) - 1]!
  const others = cluster.nodes.filter((n) => n !== leaderNode).map((n) => n.url)

  const nc = await connect({ servers: others, maxReconnectAttempts: -1, reconnectTimeWait: 50 })
  t.teardown(() => nc.close())
  const log = await openJetStreamLog({ connection: nc, ...options })
  t.teardown(() => log.close())

  const acked = new Map<string, number>()
  const errors = new Map<string, number>()
  let untyped: unknown
  let killedAt = 0
  let killing: Promise<void> | undefined
  let firstAckAfterKill = 0
  let lastAckAt = 0
  let longestGap = 0
  let next = 0
  const worker = async () => {
    while (next < APPENDS) {
      const id = `sig-${next++}`
      for (;;) {
        try {
          const { seq } = await log.append(id, Buffer.from(id))
          const now = performance.now()
          if (lastAckAt > 0) longestGap = Math.max(longestGap, now - lastAckAt)
          lastAckAt = now
          if (killedAt > 0 && firstAckAfterKill === 0) firstAckAfterKill = now
          acked.set(id, seq)
          break
        } catch (err) {
          const code = isLogError(err) ? err.code : 'untyped'
          if (code === 'untyped') untyped ??= err
          errors.set(code, (errors.get(code) ?? 0) + 1)
          await new Promise((r) => setTimeout(r, RETRY_MS))
        }
      }
      if (acked.size === KILL_AFTER && killing === undefined) {
        killedAt = performance.now()
        killing = leaderNode.kill()
      }
    }
  }
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker))
  await killing

  // Appends in flight when the leader died are acknowledged right after the kill: the stall is the longest gap between acks.
  const stall = longestGap
  const newLeader = (await jsm.streams.info('ha')).cluster?.leader
  t.comment(`leader ${leader} killed after ${KILL_AFTER} acks: appends stalled ${Math.round(stall)} ms (the longest gap between acks; the first ack after the kill came ${Math.round(firstAckAfterKill - killedAt)} ms after it); new leader ${newLeader}; failures ${JSON.stringify(Object.fromEntries(errors))}`)
  t.ok(longestGap > 1000, 'the kill did stall the appends (an election happened)')
  t.equal(untyped, undefined, 'no failure outside the log\'s error type')
  t.same([...errors.keys()], ['unavailable'], 'every failure during the election was unavailable (transient), and there were some')
  t.equal(acked.size, APPENDS, 'every append acknowledged in the end')

  const stored: LogRecord[] = []
  while (stored.length < APPENDS + 10) {
    const page = await retried(() => log.read({ fromSeq: (stored.at(-1)?.seq ?? 0) + 1 }, 1000))
    if (page.length === 0) break
    stored.push(...page)
  }
  const byId = new Map<string, number[]>()
  for (const r of stored) byId.set(r.dedupId, [...(byId.get(r.dedupId) ?? []), r.seq])
  t.same([...byId].filter(([, seqs]) => seqs.length > 1), [], 'none stored twice')
  t.same([...byId.keys()].filter((id) => !acked.has(id)), [], 'none stored without its ack')
  t.same([...acked].filter(([id, seq]) => byId.get(id)?.[0] !== seq), [], 'each acknowledged append stored at the seq its ack gave')
  t.equal(stored.length, APPENDS)
})
