import { verify } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { EventSource } from 'eventsource'
import t from 'tap'
import { launchGateway, type LaunchedGateway } from '../../harness/gateway-launcher.js'
import { publicKeyOf, signedContent } from '../../delivery/webhooks/delivery-keys.js'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { call, payload, provision, push, type Provisioned } from '../helpers/api.js'
import { flakyEventSource } from '../helpers/flaky-event-source.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * `byo.signal.disputed` on every channel: a real gateway, real EventSources (one cut at
 * random), polling, and a kill -9 and restart on the same data. An accepted dispute's
 * events sit after the log record that was last when it was accepted, with the same
 * event ids everywhere, once each, only for the rentals that received the signals.
 */

const KINDS = ['byo.signal.accepted', 'byo.signal.disputed'] as const
const ENV = { STREAM_HEARTBEAT_MS: '300', STREAM_RETRY_MS: '50', STREAM_END_SETTLE_MS: '300' }

let counter = 0
async function renter(gw: LaunchedGateway): Promise<{ token: string; subject: string }> {
  const subject = `renter:d${++counter}_${Date.now().toString(36)}`
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  if (res.status !== 201) throw new Error(`renter token: ${res.status}`)
  return { token: res.body.data.token, subject }
}

async function rent(gw: LaunchedGateway, renterId: string, sourceId: string): Promise<string> {
  const res = await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: renterId, source_id: sourceId } })
  if (res.status !== 201) throw new Error(`rental: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.rental_id
}

async function poll(gw: LaunchedGateway, token: string, rentalId: string, after: string | null, limit = 100): Promise<{ data: any[]; next: string | null }> {
  const q = after === null ? `?limit=${limit}` : `?limit=${limit}&after=${after}`
  const res = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals${q}`, { token })
  if (res.status !== 200) throw new Error(`poll: ${res.status} ${JSON.stringify(res.body)}`)
  return { data: res.body.data, next: res.body.next_cursor }
}

/** Every event polling yields from `after`, page by page. */
async function pollAll(gw: LaunchedGateway, token: string, rentalId: string, limit: number, after: string | null = null): Promise<any[]> {
  const events: any[] = []
  for (let i = 0; i < 200; i++) {
    const page = await poll(gw, token, rentalId, after, limit)
    events.push(...page.data)
    if (page.next === null) return events
    after = page.next
  }
  throw new Error('polling did not end')
}

interface Collected {
  readonly got: any[]
  close(): void
}

function collect(es: EventSource): Collected {
  const got: any[] = []
  for (const kind of KINDS) es.addEventListener(kind, (e) => got.push({ ...JSON.parse(e.data), lastEventId: e.lastEventId }))
  return { got, close: () => es.close() }
}

function stream(gw: LaunchedGateway, token: string, rentalId: string, lastEventId?: string): Collected {
  const q = lastEventId === undefined ? '' : `?last_event_id=${lastEventId}`
  return collect(
    new EventSource(`${gw.url}/v1/rentals/${rentalId}/events${q}`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` } }),
    }),
  )
}

async function until(what: string, ok: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(25)
  }
}

const ids = (events: readonly any[]) => events.map((e) => `${e.event === 'byo.signal.disputed' ? 'disputed' : 'accepted'} ${e.event_id} ${e.signal_id}`)

/** A source whose first key (`leakedKeyId`) is replaced by a second (`sign`), ready to be revoked. */
async function rotate(gw: LaunchedGateway, src: Provisioned): Promise<(p: Record<string, unknown>) => ReturnType<Provisioned['sign']>> {
  const next = generateCreatorKey()
  const registered = await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken, body: { public_key: next.publicKeyBase64 } })
  const keyId = registered.body.data.key_id as string
  const sign = (p: Record<string, unknown>) => src.sign(p, { key: next, keyId })
  if ((await push(gw, sign(payload(src.sourceId)))).status !== 202) throw new Error('test signal')
  if ((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${keyId}/promote`, { token: src.creatorToken })).status !== 200) throw new Error('promote')
  return sign
}

async function acceptDispute(gw: LaunchedGateway, src: Provisioned, keyId: string, signals: Array<{ signal_id: string; received_at: string }>): Promise<any> {
  const opened = await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes`, { token: src.creatorToken, body: { key_id: keyId, signals, evidence: 'the key leaked in a public CI log' } })
  if (opened.status !== 201) throw new Error(`open: ${opened.status} ${JSON.stringify(opened.body)}`)
  const accepted = await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes/${opened.body.data.dispute_id}/accept`, { token: gw.adminToken, body: {} })
  if (accepted.status !== 200) throw new Error(`accept: ${accepted.status} ${JSON.stringify(accepted.body)}`)
  return accepted.body.data
}

t.test('an accepted dispute reaches each channel once, at its place, with one event id', async (t) => {
  const gw = await startTestGateway(t, { env: ENV })
  const src = await provision(gw)
  const other = await provision(gw)
  const alice = await renter(gw)
  const bob = await renter(gw)
  const carol = await renter(gw)
  const rentalA = await rent(gw, alice.subject, src.sourceId)
  const rentalC = await rent(gw, carol.subject, other.sourceId)
  const live = stream(gw, alice.token, rentalA)
  t.teardown(() => live.close())

  const leaked: Array<{ signal_id: string; received_at: string }> = []
  for (let i = 0; i < 3; i++) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    t.equal(res.status, 202)
    leaked.push({ signal_id: res.body.signal_id, received_at: res.body.received_at })
  }
  t.equal((await push(gw, other.sign(payload(other.sourceId)))).status, 202, "another source's signal")
  // Bob's rental starts after the leaked signals: the dispute names none he received.
  await sleep(5)
  const rentalB = await rent(gw, bob.subject, src.sourceId)
  const sign = await rotate(gw, src)
  const before = await push(gw, sign(payload(src.sourceId)))
  t.equal(before.status, 202)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })).status, 200)

  const dispute = await acceptDispute(gw, src, src.keyId, [leaked[2]!, leaked[0]!])
  t.type(dispute.after_seq, 'number', 'the accepted dispute says where it is delivered')
  const seqOf = (signalId: string) => (dispute.signals as any[]).find((s) => s.signal_id === signalId).seq as number
  const after = await push(gw, sign(payload(src.sourceId)))
  t.equal(after.status, 202)

  const A = dispute.after_seq as number
  const d0 = `${A}.d${seqOf(leaked[0]!.signal_id)}`
  const d2 = `${A}.d${seqOf(leaked[2]!.signal_id)}`
  await until('the live stream', () => live.got.length >= 7)
  await sleep(400) // a duplicate would arrive meanwhile
  const expected = [
    ...leaked.map((l) => `accepted ${l.signal_id}`),
    `accepted ${before.body.signal_id}`,
    `disputed ${leaked[0]!.signal_id}`,
    `disputed ${leaked[2]!.signal_id}`,
    `accepted ${after.body.signal_id}`,
  ]
  t.same(
    live.got.map((e) => `${e.event === 'byo.signal.disputed' ? 'disputed' : 'accepted'} ${e.signal_id}`),
    expected,
    'live: the dispute after the records before its acceptance, before those after, each signal once in seq order',
  )
  const disputed = live.got.filter((e) => e.event === 'byo.signal.disputed')
  t.same(
    disputed.map((e) => e.event_id),
    [d0, d2],
    'its event ids are after_seq.d<signal seq>',
  )
  for (const e of live.got) t.equal(e.lastEventId, e.event_id, 'the SSE id is the event_id')
  t.same(Object.keys(disputed[0]).sort(), ['dispute_id', 'disputed_at', 'event', 'event_id', 'lastEventId', 'rental_id', 'signal_event_id', 'signal_id', 'source_id'])
  t.equal(disputed[0].signal_event_id, live.got[0].event_id, "signal_event_id names the signal's own event")
  t.equal(disputed[0].dispute_id, dispute.dispute_id)
  t.equal(disputed[0].disputed_at, dispute.resolved_at)

  t.test('polling yields the same events with the same ids, whatever the page size', async (t) => {
    for (const limit of [1, 2, 3, 100]) t.same(ids(await pollAll(gw, alice.token, rentalA, limit)), ids(live.got), `limit ${limit}`)
    const page = await poll(gw, alice.token, rentalA, String(A), 1)
    t.equal(page.next, d0, 'a page ending on a dispute event gives its id as next_cursor')
  })

  t.test('a second stream from the start gives the same ids', async (t) => {
    const second = stream(gw, alice.token, rentalA)
    await until('the second stream', () => second.got.length >= 7)
    await sleep(300)
    second.close()
    t.same(ids(second.got), ids(live.got))
  })

  t.test('resuming from a dispute event does not repeat it; from its record, it comes again', async (t) => {
    const tail = (id: string) => ids(live.got.slice(live.got.findIndex((e) => e.event_id === id) + 1))
    t.same(ids(await pollAll(gw, alice.token, rentalA, 100, d0)), tail(d0), `poll after ${d0}`)
    t.same(ids(await pollAll(gw, alice.token, rentalA, 100, d2)), tail(d2), `poll after ${d2}`)
    // A is the dispute's placement record, which is no event: after it come both dispute events.
    t.same(ids(await pollAll(gw, alice.token, rentalA, 100, String(A))), ids(live.got.slice(live.got.findIndex((e) => e.event_id === d0))), `poll after ${A}: both dispute events`)
    const resumed = stream(gw, alice.token, rentalA, d0)
    await until('the resumed stream', () => resumed.got.length >= 2)
    await sleep(300)
    resumed.close()
    t.same(ids(resumed.got), tail(d0), `SSE Last-Event-ID ${d0}`)
  })

  t.test('a rental that did not receive the signals gets no dispute event', async (t) => {
    const bobs = await pollAll(gw, bob.token, rentalB, 100)
    t.same(
      bobs.map((e) => `${e.event} ${e.signal_id}`),
      [`byo.signal.accepted ${before.body.signal_id}`, `byo.signal.accepted ${after.body.signal_id}`],
      'started after the leaked signals: only its own window',
    )
    const carols = await pollAll(gw, carol.token, rentalC, 100)
    t.same(
      carols.map((e) => e.event),
      ['byo.signal.accepted'],
      'another source: nothing of this dispute',
    )
  })

  t.test('a kill -9 and a restart on the same data keep the dispute, its place and its ids', async (t) => {
    await gw.kill()
    const again = await launchGateway({ dataDir: gw.dataDir, adminToken: gw.adminToken, env: { LOG_LEVEL: 'info', ...ENV } })
    t.teardown(() => again.kill())
    t.same(ids(await pollAll(again, alice.token, rentalA, 2)), ids(live.got), 'polling after the restart')
    const resumed = stream(again, alice.token, rentalA, String(A))
    await until('the stream after the restart', () => resumed.got.length >= 3)
    await sleep(300)
    resumed.close()
    t.same(ids(resumed.got), ids(live.got.slice(4)), 'a stream resuming before the dispute gets it once')
  })
})

t.test('an EventSource cut at random while a dispute is accepted mid-traffic gets every event once, as polling does', async (t) => {
  const gw = await startTestGateway(t, { env: ENV })
  const src = await provision(gw)
  const alice = await renter(gw)
  const rentalId = await rent(gw, alice.subject, src.sourceId)
  const cuts = { count: 0 }
  const flaky = collect(flakyEventSource(`${gw.url}/v1/rentals/${rentalId}/events`, alice.token, cuts))
  t.teardown(() => flaky.close())
  const leaked: Array<{ signal_id: string; received_at: string }> = []
  for (let i = 0; i < 6; i++) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    leaked.push({ signal_id: res.body.signal_id, received_at: res.body.received_at })
    await sleep(Math.random() * 40)
  }
  const sign = await rotate(gw, src)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })).status, 200)
  // Signals keep coming while two disputes are accepted, one of them at the same moment as an append.
  let pushing = true
  let pushed = 0
  const traffic = (async () => {
    while (pushing) {
      if ((await push(gw, sign(payload(src.sourceId)))).status === 202) pushed++
      await sleep(Math.random() * 30)
    }
  })()
  await sleep(300)
  const first = await acceptDispute(gw, src, src.keyId, [leaked[1]!, leaked[4]!])
  await sleep(300)
  const [second] = await Promise.all([acceptDispute(gw, src, src.keyId, [leaked[0]!]), push(gw, sign(payload(src.sourceId))).then(() => pushed++)])
  await sleep(300)
  pushing = false
  await traffic
  const total = leaked.length + pushed + 3
  await until('the flaky stream', () => flaky.got.length >= total, 25_000)
  await sleep(600)
  const polled = await pollAll(gw, alice.token, rentalId, 7)
  t.equal(polled.length, total, 'polling: every signal and the three dispute events')
  t.ok(cuts.count >= 2, `the connection was cut ${cuts.count} times`)
  t.same(ids(flaky.got), ids(polled), 'the stream that resumed by itself got exactly what polling yields')
  t.ok(second.after_seq > first.after_seq, 'the later dispute is placed later')
  t.equal(new Set(flaky.got.map((e) => e.event_id)).size, flaky.got.length, 'no event twice')
})

t.test('a webhook receiver gets each dispute event once, signed, in order, also when accepted while the worker idles, and across a kill -9', async (t) => {
  const got: { id: string; ts: string; sig: string; body: string }[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      got.push({ id: String(req.headers['webhook-id']), ts: String(req.headers['webhook-timestamp']), sig: String(req.headers['webhook-signature']), body })
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`
  const env = { ...ENV, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }
  const gw = await startTestGateway(t, { env })
  const src = await provision(gw)
  const alice = await renter(gw)
  const rentalId = await rent(gw, alice.subject, src.sourceId)
  t.equal((await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: alice.token, body: { url: hook } })).status, 200)
  const leaked: Array<{ signal_id: string; received_at: string }> = []
  for (let i = 0; i < 3; i++) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    leaked.push({ signal_id: res.body.signal_id, received_at: res.body.received_at })
  }
  const sign = await rotate(gw, src)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })).status, 200)
  t.equal((await push(gw, sign(payload(src.sourceId)))).status, 202)
  await until('the four signals', () => got.length >= 4)
  await sleep(300) // the worker now waits at the log's end

  const dispute = await acceptDispute(gw, src, src.keyId, [leaked[0]!, leaked[2]!])
  await until('the dispute events', () => got.length >= 6)
  t.equal((await push(gw, sign(payload(src.sourceId)))).status, 202)
  await until('the signal after', () => got.length >= 7)

  // kill -9 once the last delivery is acknowledged (a kill between a delivery and its
  // acknowledgement sends it again, at least once), then one more signal: nothing is sent again.
  await sleep(500)
  await gw.kill()
  const again = await launchGateway({ dataDir: gw.dataDir, adminToken: gw.adminToken, env: { LOG_LEVEL: 'info', ...env } })
  t.teardown(() => again.kill())
  t.equal((await push(again, sign(payload(src.sourceId)))).status, 202)
  await until('the signal after the restart', () => got.length >= 8)
  await sleep(800) // a repeat would arrive meanwhile

  const bodies = got.map((g) => JSON.parse(g.body))
  const polled = await pollAll(again, alice.token, rentalId, 100)
  t.same(ids(bodies), ids(polled), 'the webhook events are the polled ones, in the same order, once each')
  const disputed = bodies.filter((b) => b.event === 'byo.signal.disputed')
  t.same(
    disputed.map((b) => b.event_id),
    (dispute.signals as any[]).map((s) => `${dispute.after_seq}.d${s.seq}`).sort(),
    'one event per named signal, at after_seq',
  )
  t.same(
    got.filter((g) => g.id.includes('.d')).map((g) => g.id),
    disputed.map((b) => `msg_${rentalId}_${b.event_id}`),
    'webhook-id is stable, from the event id',
  )
  t.equal(new Set(got.map((g) => g.id)).size, got.length, 'no webhook-id twice')
  const published = (await call(again.url, 'GET', '/v1/delivery-keys')).body.data as Array<{ public_key: string }>
  t.ok(published.length > 0, 'the published keys')
  for (const g of got) {
    const ok = g.sig.split(' ').some((part) => {
      const [version, sig] = part.split(',')
      return version === 'v1a' && published.some((k) => verify(null, signedContent(g.id, Number(g.ts), g.body), publicKeyOf(k.public_key), Buffer.from(sig!, 'base64')))
    })
    t.ok(ok, `${g.id}: the signature verifies with a published key`)
  }
})
