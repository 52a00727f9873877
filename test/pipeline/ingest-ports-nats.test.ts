import t from 'tap'
import { connect } from '@nats-io/transport-node'
import type { NatsConnection } from '@nats-io/transport-node'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { composeNatsIngest } from '../../pipeline/ingest/nats/nats-ingest.js'
import { NatsNonceClaims } from '../../pipeline/ingest/nats/nonce-claims.js'
import { NatsRefusalHistory } from '../../pipeline/ingest/nats/refusal-history.js'
import { NatsSignalIndex } from '../../pipeline/ingest/nats/signal-index.js'
import { KvRateBuckets } from '../../pipeline/ingest/nats/rate-buckets.js'
import { natsKvBuckets } from '../../storage/index.js'
import { NatsRevocationBarrier, type NatsRevocationBarrierOptions } from '../../pipeline/ingest/nats/revocation-barrier.js'
import { nonceClaimsContract } from '../contracts/nonce-claims-contract.js'
import { rateBucketsContract } from '../contracts/rate-buckets-contract.js'
import { refusalHistoryContract } from '../contracts/refusal-history-contract.js'
import { signalIndexContract } from '../contracts/signal-index-contract.js'
import { revocationBarrierContract } from '../contracts/revocation-barrier-contract.js'

// The NATS adapters of the ingest ports, each run through its port's contract against a
// real nats-server. The two views a contract asks for are two gateways: two adapters on
// two separate connections, sharing nothing but the server.

// One server for the file (a missing nats-server fails here, with the install command).
const server = await startNatsServer()
const url = server.nodes[0]!.url
const connections: NatsConnection[] = []
t.teardown(async () => {
  for (const nc of connections) await nc.close()
  await server.close()
})

async function gateway(): Promise<NatsConnection> {
  const nc = await connect({ servers: url, reconnectTimeWait: 50, maxReconnectAttempts: -1 })
  connections.push(nc)
  return nc
}
const [ncA, ncB] = [await gateway(), await gateway()]

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Each contract case gets its own streams and subjects. */
let cases = 0
const fresh = (kind: string) => `${kind}_${++cases}`

nonceClaimsContract(t, 'nats', async (_t, { windowMs }) => {
  const name = fresh('nonces')
  const options = { stream: name, subjectPrefix: `t.${name}`, windowMs, maxLiveNonces: 100_000 }
  return { a: await NatsNonceClaims.open({ nc: ncA, ...options }), b: await NatsNonceClaims.open({ nc: ncB, ...options }) }
})

rateBucketsContract(t, 'nats', async (t, { flagAfterMinutes }) => {
  const name = fresh('rates')
  const open = async (nc: NatsConnection) => {
    const bucket = await natsKvBuckets(nc)(name, KvRateBuckets.bucketLimits(1000))
    t.teardown(() => bucket.close())
    return new KvRateBuckets(bucket, { flagAfterMinutes, onWarning: (m, err) => t.fail(`${m}: ${String(err)}`) })
  }
  return { a: await open(ncA), b: await open(ncB) }
})

revocationBarrierContract(t, 'nats', async (t) => {
  const bucket = fresh('barrier')
  const open = (nc: NatsConnection) => NatsRevocationBarrier.open({ nc, bucket, heartbeatMs: 100, onWarning: (m, err) => t.fail(`${m}: ${String(err)}`) })
  const [a, b] = [await open(ncA), await open(ncB)]
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  return { a, b }
})

t.test('nats revocation barrier: which gateways settled waits for', async (t) => {
  const openOn = (nc: NatsConnection, bucket: string, extra: Partial<NatsRevocationBarrierOptions> = {}) =>
    NatsRevocationBarrier.open({ nc, bucket, heartbeatMs: 50, lapseMs: 300, settleTimeoutMs: 5_000, ...extra })
  const KEY = { sourceId: 'src_1', keyId: 'key_1' }
  const never = new Promise<void>(() => undefined)

  t.test('a gateway that stopped (its presence no longer rewritten) holds a revocation back for the lapse at most', async (t) => {
    const bucket = fresh('barrier')
    const nc = await connect({ servers: url })
    const dying = await openOn(nc, bucket)
    const revoker = await openOn(ncB, bucket)
    t.teardown(() => revoker.close())
    dying.hold(KEY, never)
    // A crash: the connection goes, the presence key stays until it ages.
    await nc.close()
    const started = Date.now()
    await revoker.settled(KEY)
    t.ok(Date.now() - started < 2_000, `settled after ${Date.now() - started} ms, once the presence lapsed`)
  })

  t.test('a gateway that closed is not waited for', async (t) => {
    const bucket = fresh('barrier')
    // A lapse far longer than a loaded machine's delays, so only the close can end the wait.
    const a = await openOn(ncA, bucket, { lapseMs: 20_000 })
    const b = await openOn(ncB, bucket, { lapseMs: 20_000 })
    t.teardown(() => b.close())
    a.hold(KEY, never)
    await a.close()
    const started = Date.now()
    await b.settled(KEY)
    t.ok(Date.now() - started < 10_000, `settled after ${Date.now() - started} ms, without waiting for the 20 s lapse`)
  })

  t.test('a live gateway with a hold under the scope is waited for until settleTimeoutMs, then settled fails unavailable', async (t) => {
    const bucket = fresh('barrier')
    const a = await openOn(ncA, bucket)
    const b = await openOn(ncB, bucket, { settleTimeoutMs: 600 })
    t.teardown(async () => {
      await a.close()
      await b.close()
    })
    a.hold(KEY, never)
    await t.rejects(b.settled(KEY), { code: 'unavailable' })
    t.equal(await Promise.race([b.settled({ sourceId: 'src_2' }).then(() => 'settled'), sleep(1_000).then(() => 'waiting')]), 'settled', 'another source is not held back')
  })

  t.test("a gateway acknowledges only once its registry view has caught up, then waits for the holds taken before that", async (t) => {
    const bucket = fresh('barrier')
    let catchUp!: () => void
    const a = await openOn(ncA, bucket, { caughtUp: () => new Promise<void>((resolve) => (catchUp = resolve)) })
    const b = await openOn(ncB, bucket)
    t.teardown(async () => {
      await a.close()
      await b.close()
    })
    const settled = b.settled(KEY)
    await sleep(100)
    // Taken while a's view still showed the key valid: its request may yet answer 202.
    let answer!: () => void
    a.hold(KEY, new Promise<void>((resolve) => (answer = resolve)))
    t.equal(await Promise.race([settled.then(() => 'settled'), sleep(200).then(() => 'waiting')]), 'waiting', 'waits for the view')
    catchUp()
    t.equal(await Promise.race([settled.then(() => 'settled'), sleep(200).then(() => 'waiting')]), 'waiting', 'then for the hold taken before it')
    answer()
    t.equal(await Promise.race([settled.then(() => 'settled'), sleep(1_000).then(() => 'waiting')]), 'settled')
  })
})

refusalHistoryContract(t, 'nats', async (t, { perSource }) => {
  const name = fresh('refusals')
  const options = { stream: name, subjectPrefix: `t.${name}`, perSource, maxRecords: 100_000, onWarning: (m: string, err: unknown) => t.fail(`${m}: ${String(err)}`) }
  return { a: await NatsRefusalHistory.open({ nc: ncA, ...options }), b: await NatsRefusalHistory.open({ nc: ncB, ...options }) }
})

signalIndexContract(t, 'nats', async (t, { dedupWindowMs }) => {
  const name = fresh('signals')
  const options = { stream: name, subjectPrefix: `t.${name}`, partitions: 2, dedupWindowMs, retainMs: 60_000, maxEntries: 100_000, onWarning: (m: string, err: unknown) => t.fail(`${m}: ${String(err)}`) }
  return { a: await NatsSignalIndex.open({ nc: ncA, ...options }), b: await NatsSignalIndex.open({ nc: ncB, ...options }) }
})

t.test('composeNatsIngest: two gateways opened on one name share their nonces, signals and refusals', async (t) => {
  const name = fresh('composed')
  const open = (nc: NatsConnection) => composeNatsIngest({
    nc, name, nonceWindowMs: 60_000, maxLiveNonces: 10_000, dedupWindowMs: 60_000, signalRetainMs: 120_000, maxSignalEntries: 10_000,
    signalPartitions: 3, refusalsPerSource: 10, maxRefusals: 10_000, flagAfterMinutes: 5, maxSources: 1000, onWarning: (m, err) => t.fail(`${m}: ${String(err)}`),
  })
  const [a, b] = [await open(ncA), await open(ncB)]
  t.teardown(async () => {
    await a.close()
    await b.close()
  })
  const claim = { sourceId: 'src_1', keyId: 'key_1', nonce: 'n-1', now: Date.now(), sourceCap: 100 }
  t.equal(await a.ports.nonces.claim(claim), 'claimed')
  t.equal(await b.ports.nonces.claim(claim), 'replayed')
  const ask = { sourceId: 'src_1', signalId: 'sig_1', idempotencyKey: undefined, bodySha256: 'ab', now: Date.now(), keyId: 'key_1', claimedNonce: 'n-1', receivedAtMs: Date.now() }
  const check = await a.ports.signals.check(ask)
  if (check.kind !== 'new') throw new Error(`expected new, got ${check.kind}`)
  t.equal((await b.ports.signals.check(ask)).kind, 'in_flight')
  check.reservation.release()
  t.equal(await b.ports.signals.hasAccepted('src_1', 'sig_1'), false)
  t.equal(await Promise.race([b.ports.revocations.settled({ sourceId: 'src_1' }).then(() => 'settled'), sleep(2_000).then(() => 'waiting')]), 'settled')
})

t.test('nats bounds: the servers hold what the options allow, no more', async (t) => {
  t.test('past maxLiveNonces a claim is store_full, and nothing was claimed', async (t) => {
    const name = fresh('nonces')
    const claims = await NatsNonceClaims.open({ nc: ncA, stream: name, subjectPrefix: `t.${name}`, windowMs: 60_000, maxLiveNonces: 3 })
    const claim = (nonce: string) => claims.claim({ sourceId: 'src_1', keyId: 'key_1', nonce, now: Date.now(), sourceCap: 100 })
    for (const nonce of ['n-1', 'n-2', 'n-3']) t.equal(await claim(nonce), 'claimed')
    t.equal(await claim('n-4'), 'store_full')
    t.equal(await claim('n-1'), 'replayed', 'a held nonce is still replayed')
  })

  t.test('past maxEntries a new signal is no_room store_full, and its id stays free', async (t) => {
    const name = fresh('signals')
    const index = await NatsSignalIndex.open({ nc: ncA, stream: name, subjectPrefix: `t.${name}`, partitions: 1, dedupWindowMs: 60_000, retainMs: 60_000, maxEntries: 2, onWarning: (m) => t.fail(m) })
    const ask = (signalId: string) => ({ sourceId: 'src_1', signalId, idempotencyKey: undefined, bodySha256: 'ab', now: Date.now(), keyId: 'key_1', claimedNonce: undefined, receivedAtMs: Date.now() })
    for (const id of ['sig_1', 'sig_2']) t.equal((await index.check(ask(id))).kind, 'new')
    t.same(await index.check(ask('sig_3')), { kind: 'no_room', room: 'store_full' })
    t.equal(await index.hasAccepted('src_1', 'sig_3'), false)
  })

  t.test("a reservation whose gateway died frees its ids after reservationTtlMs", async (t) => {
    const name = fresh('signals')
    const options = { stream: name, subjectPrefix: `t.${name}`, partitions: 1, dedupWindowMs: 60_000, retainMs: 60_000, maxEntries: 100, reservationTtlMs: 300, onWarning: (m: string) => t.fail(m) }
    const [a, b] = [await NatsSignalIndex.open({ nc: ncA, ...options }), await NatsSignalIndex.open({ nc: ncB, ...options })]
    const ask = () => ({ sourceId: 'src_1', signalId: 'sig_1', idempotencyKey: undefined, bodySha256: 'ab', now: Date.now(), keyId: 'key_1', claimedNonce: undefined, receivedAtMs: Date.now() })
    t.equal((await a.check(ask())).kind, 'new', 'held, never released (its gateway died)')
    const waiting = await b.check(ask())
    if (waiting.kind !== 'in_flight') throw new Error(`expected in_flight, got ${waiting.kind}`)
    await waiting.settled
    const again = await b.check(ask())
    t.equal(again.kind, 'new', 'taken over once the reservation expired')
    if (again.kind === 'new') again.reservation.release()
  })
})
