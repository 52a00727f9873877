import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rent, renterToken, sseEvents, streamReader } from '../helpers/renter-channels.js'

/**
 * An accepted dispute's place in the rental's order on a cluster: a gateway (G) accepts
 * a dispute while signals are pushed through it, and a delivery process (D), with its own
 * DATA_DIR and no share in G's memory, serves a live SSE stream and a webhook. The live
 * order on D (stream and webhook) must be the replay order (polling from the start, a
 * new stream from the start) for the dispute events and the signals around them: the
 * dispute takes its place from its placement record in the log, which D meets itself.
 */

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')
const env = { NATS_URL: nats.urls, ADMIN_TOKEN: adminToken }

const hooked: string[] = []
const receiver = createServer((req, res) => {
  let body = ''
  req.on('data', (c: Buffer) => (body += c.toString()))
  req.on('end', () => {
    hooked.push(body)
    res.writeHead(200).end()
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => resolve()) }))
const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`

const [g, d] = await Promise.all([
  startTestGateway(t, { env: { ...env, ROLE: 'gateway' }, adminToken }),
  startTestGateway(t, { env: { ...env, ROLE: 'delivery', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, adminToken }),
])

const label = (e: any) => `${e.event === 'byo.signal.disputed' ? 'disputed' : 'accepted'} ${e.event_id}`
const delivered = (events: readonly any[]) => events.filter((e) => e.event === 'byo.signal.accepted' || e.event === 'byo.signal.disputed').map(label)

async function until(what: string, ok: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(25)
  }
}

t.test('the dispute events and the signals around them come live in the order a replay gives', async (t) => {
  const src = await provision(g)
  const renter = await renterToken(g)
  const rentalId = await rent(g, { renter_id: renter.subject, source_id: src.sourceId })
  // Registered through D: its webhook worker delivers.
  t.equal((await call(d.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renter.token, body: { url: hook } })).status, 200)
  const open = await fetch(`${d.url}/v1/rentals/${rentalId}/events`, { headers: { authorization: `Bearer ${renter.token}` } })
  t.equal(open.status, 200)
  const live = streamReader(open)
  t.teardown(() => live.cancel())

  const leaked: Array<{ signal_id: string; received_at: string }> = []
  for (let i = 0; i < 6; i++) {
    const res = await push(g, src.sign(payload(src.sourceId)))
    t.equal(res.status, 202)
    leaked.push({ signal_id: res.body.signal_id, received_at: res.body.received_at })
  }
  // The compromise flow: a new key takes over, the leaked one is revoked.
  const next = generateCreatorKey()
  const keyId = (await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken, body: { public_key: next.publicKeyBase64 } })).body.data.key_id as string
  const sign = (p: Record<string, unknown>) => src.sign(p, { key: next, keyId })
  t.equal((await push(g, sign(payload(src.sourceId)))).status, 202)
  t.equal((await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${keyId}/promote`, { token: src.creatorToken })).status, 200)
  t.equal((await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token: src.creatorToken })).status, 200)
  // Six disputes of one signal each.
  const disputes: string[] = []
  for (let i = 0; i < 6; i++) {
    const opened = await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes`, { token: src.creatorToken, body: { key_id: src.keyId, signals: leaked.slice(i, i + 1), evidence: 'the key leaked' } })
    t.equal(opened.status, 201)
    disputes.push(opened.body.data.dispute_id)
  }

  // Signals keep coming through G on eight lanes while the disputes are accepted there at once: their
  // registry writes (one key per source) wait for each other, so records follow a placement before its dispute is recorded.
  let pushing = true
  let pushed = 0
  const lane = async () => {
    while (pushing || pushed < 60) {
      const res = await push(g, sign(payload(src.sourceId)))
      if (res.status !== 202) throw new Error(`push: ${res.status}`)
      pushed++
    }
  }
  const lanes = Promise.all(Array.from({ length: 8 }, lane))
  await until('signals under way', () => pushed >= 16)
  const disputeIds: string[] = []
  const places: number[] = []
  const answers = await Promise.all(disputes.map((id) => call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/disputes/${id}/accept`, { token: adminToken, body: {} })))
  for (const accepted of answers.sort((x, y) => x.body.data.after_seq - y.body.data.after_seq)) {
    t.equal(accepted.status, 200)
    const afterSeq = accepted.body.data.after_seq as number
    places.push(afterSeq)
    disputeIds.push(...(accepted.body.data.signals as any[]).map((s) => `disputed ${afterSeq}.d${s.seq}`))
  }
  pushing = false
  await lanes

  // Every event: 6 leaked, the pushed ones, 6 dispute events (the new key's test signal is never delivered).
  const total = 6 + pushed + 6
  await live.until(() => delivered(sseEvents(live.state.text)).length >= total, 20_000)
  await until(`the webhook events (${total})`, () => hooked.length >= total).catch((err: Error) => {
    throw new Error(`${err.message}: ${hooked.length} came, the stream has ${delivered(sseEvents(live.state.text)).length}: ${delivered(hooked.map((b) => JSON.parse(b))).slice(-5).join(', ')}`)
  })
  await sleep(300) // a duplicate would arrive meanwhile
  const liveOrder = delivered(sseEvents(live.state.text))
  const hookOrder = delivered(hooked.map((b) => JSON.parse(b)))

  const polled: any[] = []
  let after: string | null = null
  for (let i = 0; i < 100; i++) {
    const page: { status: number; body: any } = await call(d.url, 'GET', `/v1/rentals/${rentalId}/signals?limit=7${after === null ? '' : `&after=${after}`}`, { token: renter.token })
    t.equal(page.status, 200)
    polled.push(...page.body.data)
    after = page.body.next_cursor
    if (after === null) break
  }
  const replay = await fetch(`${d.url}/v1/rentals/${rentalId}/events`, { headers: { authorization: `Bearer ${renter.token}` } })
  const again = streamReader(replay)
  await again.until(() => delivered(sseEvents(again.state.text)).length >= total, 20_000)
  await again.cancel()

  const replayOrder = delivered(polled)
  t.equal(replayOrder.length, total, 'the replay has every event once')
  t.same(replayOrder.filter((e) => e.startsWith('disputed')), disputeIds, 'the dispute events, after their placement records')
  for (const [i, place] of places.entries()) {
    const firstAfter = replayOrder.findIndex((e) => e.startsWith('accepted') && Number(e.split(' ')[1]) > place)
    t.ok(firstAfter === -1 || replayOrder.indexOf(disputeIds[i]!) < firstAfter, `dispute ${i + 1}: before every signal stored after its placement`)
  }
  t.same(liveOrder, replayOrder, 'the live stream on D: the replay order')
  t.same(hookOrder, replayOrder, 'the webhook from D: the replay order')
  t.same(delivered(sseEvents(again.state.text)), replayOrder, 'a new stream from the start: the same order')
  t.comment(`${pushed} signals pushed during the acceptances; the disputes are placed after records ${places.join(', ')}`)
})
