import { randomBytes } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { Kvm } from '@nats-io/kv'
import { connect } from '@nats-io/transport-node'
import { EventSource } from 'eventsource'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { LEASE_SHARDS, shardOf } from '../../delivery/webhooks/shard-lease.js'
import { leaseHolderOf } from '../../storage/lease-key.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { failoverFetch, type Forwarded } from '../helpers/failover-fetch.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { orderProblems, type Arrival } from '../helpers/webhook-order.js'
import { until } from '../helpers/wait-until.js'
import { sharedReceiver } from '../helpers/webhook-receiver.js'

/**
 * A delivery process killed with kill -9 while renters are live on it, on a real
 * nats-server: a gateway and two delivery processes (D1, D2), two rentals whose webhook
 * shards D1 holds, each with a webhook to a local receiver and an EventSource open on D1.
 * D1 dies a third of the way through a burst of signals. The EventSource clients, behind a
 * balancer that sends them to D2 once D1 refuses connections, resume there with their
 * Last-Event-ID: every signal reaches each stream exactly once, in log order. D2 takes
 * D1's webhook shards once their leases lapse: every signal reaches each webhook at least
 * once, first arrivals in event-id order, repeats with the webhook-id and body of the first.
 */

const SIGNALS = 240
const WORKERS = 4
/** Short leases, so the take-over after the kill comes within seconds (the default is 15 s). */
const LEASE_MS = 2000
const RENTALS = 2

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')
const deliveryEnv = {
  NATS_URL: nats.urls,
  ROLE: 'delivery',
  WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
  WEBHOOK_RETRY_FIRST_MS: '50',
  WEBHOOK_LEASE_MS: String(LEASE_MS),
  // The clients reconnect 100 ms after losing their stream rather than 3 s.
  STREAM_RETRY_MS: '100',
}

interface StreamEvent {
  readonly eventId: string
  readonly signalId: string
  /** Requests the client had sent when the event came: the event came on the last of them. */
  readonly request: number
  readonly at: number
}

interface Client {
  readonly rentalId: string
  readonly es: EventSource
  readonly forwarded: Forwarded[]
  readonly got: StreamEvent[]
}

/** Who holds each webhook shard now, by holder id (null: free). */
async function shardHolders(kv: Awaited<ReturnType<Kvm['open']>>): Promise<(string | null)[]> {
  return Promise.all(Array.from({ length: LEASE_SHARDS }, async (_, shard) => {
    const entry = await kv.get(`lease.shard.${shard}`)
    return entry === null || entry.operation !== 'PUT' ? null : leaseHolderOf(entry.value)
  }))
}

/** Every event of a rental polled from `gw`, in log order. */
async function polledEvents(gw: LaunchedGateway, token: string, rentalId: string): Promise<{ event_id: string; signal_id: string }[]> {
  const events: { event_id: string; signal_id: string }[] = []
  let after: string | null = null
  do {
    const res: { status: number; body: any } = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?limit=1000${after === null ? '' : `&after=${after}`}`, { token })
    if (res.status !== 200) throw new Error(`poll: ${res.status} ${JSON.stringify(res.body)}`)
    events.push(...res.body.data)
    after = res.body.next_cursor
  } while (after !== null)
  return events
}

t.test('a delivery process killed while EventSource clients and webhook receivers are live; clients resume on another delivery process', async (t) => {
  const gateway = await startTestGateway(t, { env: { NATS_URL: nats.urls, ROLE: 'gateway' }, adminToken })
  const [d1, d2] = await Promise.all([startTestGateway(t, { env: deliveryEnv, adminToken }), startTestGateway(t, { env: deliveryEnv, adminToken })])
  const holderOf = async (gw: LaunchedGateway) => (await readFile(join(gw.dataDir, 'webhook-holder-id'), 'utf8')).trim()
  const [h1, h2] = [await holderOf(d1!), await holderOf(d2!)]
  const nc = await connect({ servers: nats.urls })
  t.teardown(() => nc.close())
  const kv = await new Kvm(nc).open('webhooks')
  const heldBy = async (holder: string) => (await shardHolders(kv)).flatMap((h, shard) => (h === holder ? [shard] : []))

  // The two processes share the shards evenly once each has seen the other.
  await until(async () => {
    const holders = await shardHolders(kv)
    return holders.filter((h) => h === h1).length === LEASE_SHARDS / 2 && holders.filter((h) => h === h2).length === LEASE_SHARDS / 2
  }, 20_000, 'D1 and D2 hold half the shards each')
  const d1Shards = await heldBy(h1)

  // Rentals whose webhook loops D1 runs (a rental id is the gateway's to pick: rent until two land there).
  const src = await provision(gateway)
  const subject = 'renter:delivery-kill'
  const token = (await call(gateway.url, 'POST', '/v1/admin/tokens', { token: adminToken, body: { role: 'renter', subject } })).body.data.token as string
  const rentalIds: string[] = []
  const refusedRentals: number[] = []
  // Half the shards are D1's: 40 tries find two there but with a chance of about 40 in 2^40.
  for (let tries = 0; rentalIds.length < RENTALS && tries < 40; tries++) {
    const res = await call(gateway.url, 'POST', '/v1/admin/rentals', { token: adminToken, body: { renter_id: subject, source_id: src.sourceId } })
    if (res.status !== 201) refusedRentals.push(res.status)
    else if (d1Shards.includes(shardOf(res.body.data.rental_id))) rentalIds.push(res.body.data.rental_id)
  }
  t.same(refusedRentals, [], 'every rental was created')
  t.equal(rentalIds.length, RENTALS, `${RENTALS} rentals in D1's shards`)

  // The receiver keeps each rental's webhook events as they come, parsed once: the waits below only count them.
  const hooks = new Map<string, (Arrival & { at: number })[]>(rentalIds.map((id) => [id, []]))
  const hookEventIds = new Map<string, Set<string>>(rentalIds.map((id) => [id, new Set()]))
  const receiver = await sharedReceiver(t, (_req, res, d) => {
    const event = JSON.parse(d.body) as { event: string; event_id: string; rental_id: string }
    if (event.event === 'byo.signal.accepted') {
      hooks.get(event.rental_id)?.push({ id: d.id, body: d.body, eventId: event.event_id, at: Date.now() })
      hookEventIds.get(event.rental_id)?.add(event.event_id)
    }
    res.writeHead(204).end()
  })
  const clients: Client[] = []
  for (const rentalId of rentalIds) {
    // D1 learns of the rental through the rentals bucket's watch: until then the rental is 404 there.
    await until(async () => (await call(d1!.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token, body: { url: `${receiver.base}/hook/${rentalId}` } })).status === 200, 10_000, `the webhook of ${rentalId} is set on D1`)
    const forwarded: Forwarded[] = []
    const es = new EventSource(`${d1!.url}/v1/rentals/${rentalId}/events`, { fetch: failoverFetch([d1!.url, d2!.url], token, forwarded) })
    t.teardown(() => es.close())
    const got: StreamEvent[] = []
    es.addEventListener('byo.signal.accepted', (e) => {
      const event = JSON.parse(e.data) as { event_id: string; signal_id: string }
      got.push({ eventId: event.event_id, signalId: event.signal_id, request: forwarded.length, at: Date.now() })
    })
    clients.push({ rentalId, es, forwarded, got })
  }
  await until(() => clients.every((c) => c.es.readyState === EventSource.OPEN), 10_000, 'the streams are open on D1')

  // The burst: a third of it, then (once D1 is seen delivering on both channels) kill -9, then the rest, with D1 gone.
  const accepted: string[] = []
  let refused = 0
  let next = 0
  let killed: Promise<void> | undefined
  let killedAt = 0
  let exitedAt = 0
  const worker = async () => {
    while (next < SIGNALS) {
      next++
      const p = payload(src.sourceId)
      const res = await push(gateway, src.sign(p))
      if (res.status === 202) accepted.push(p['signal_id'] as string)
      else refused++
      if (accepted.length >= SIGNALS / 3) {
        killed ??= (async () => {
          await until(() => clients.every((c) => c.got.length > 0 && hooks.get(c.rentalId)!.length > 0), 10_000, 'D1 delivers on the streams and the webhooks')
          d1!.proc.kill('SIGKILL')
          killedAt = Date.now()
          t.equal((await d1!.exited()).signal, 'SIGKILL', 'D1 was killed with kill -9')
          exitedAt = Date.now()
        })()
        await killed
      }
    }
  }
  await Promise.all(Array.from({ length: WORKERS }, worker))
  t.comment(`${accepted.length} signals answered 202, ${refused} refused (not counted)`)

  // D2 takes D1's shards once their leases lapse.
  await until(async () => (await heldBy(h2)).length === LEASE_SHARDS, 15_000, 'D2 holds every shard')
  t.comment(`D2 held every shard within ${Date.now() - killedAt} ms of the kill (lease ${LEASE_MS} ms)`)

  for (const c of clients) {
    const expected = await polledEvents(d2!, token, c.rentalId)
    const expectedIds = expected.map((e) => e.event_id)
    t.same(accepted.filter((id) => !expected.some((e) => e.signal_id === id)), [], `${c.rentalId}: every 202ed signal is among the rental's events`)

    await until(() => c.got.at(-1)?.eventId === expectedIds.at(-1), 20_000, `${c.rentalId}: the stream reached the last event`)
    t.same(c.got.map((e) => e.eventId), expectedIds, `${c.rentalId}: the stream got every event exactly once, in log order, across the resume`)
    const resumed = c.forwarded.findIndex((f) => f.origin === d2!.url)
    t.ok(resumed > 0, `${c.rentalId}: the client reconnected to D2 (${c.forwarded.map((f) => (f.origin === d1!.url ? 'D1' : 'D2')).join(', ')})`)
    const onD1 = c.got.filter((e) => e.request <= resumed)
    t.ok(onD1.length > 0 && onD1.length < expectedIds.length, `${c.rentalId}: ${onD1.length} events came from D1, ${expectedIds.length - onD1.length} from D2`)
    t.equal(c.forwarded[resumed]!.lastEventId, onD1.at(-1)?.eventId, `${c.rentalId}: it resumed on D2 from the last event D1 sent`)

    await until(() => expectedIds.every((id) => hookEventIds.get(c.rentalId)!.has(id)), 20_000, `${c.rentalId}: every event reached the webhook`)
    const delivered = hooks.get(c.rentalId)!
    const runs: number[] = []
    t.same(orderProblems(delivered, expectedIds, runs), [], `${c.rentalId}: webhook first arrivals in event-id order, repeats with the same webhook-id and body`)
    const streamPause = (c.got[onD1.length]?.at ?? NaN) - killedAt
    const hookPause = (delivered.find((d) => d.at > exitedAt)?.at ?? NaN) - killedAt
    t.comment(`${c.rentalId}: the stream resumed ${streamPause} ms after the kill, the webhook ${hookPause} ms; ${delivered.length} webhook deliveries of ${expectedIds.length} events, repeated: ${runs.join(' + ') || 'none'}`)
  }
})
