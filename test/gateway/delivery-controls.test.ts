import type { IncomingMessage, ServerResponse } from 'node:http'
import { Webhook } from 'standardwebhooks'
import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, EVM_TOKEN, payload, provision, push, SOL_TOKEN, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { rent, renterToken, streamReader } from '../helpers/renter-channels.js'
import { sharedReceiver } from '../helpers/webhook-receiver.js'
import { until } from '../helpers/wait-until.js'

/**
 * The renter's controls over its deliveries, through one gateway shared by the subtests:
 * retrying a parked webhook event now, delivery filters applied alike to streams, polling
 * and webhooks (an event already parked included, an explicit re-send excepted), the
 * receipt fields of events, the webhook's health (the view, live stream notices without
 * an id, /metrics), and the `v1` (HMAC) signature scheme verified with the official
 * Standard Webhooks library. The first retry waits 60 s, so only a retry request (or a
 * filter) can end a wait within these tests.
 */

/** Answers per rental: the path `/hook/<rental_id>` picks the rental's answer (default 204). */
const answers = new Map<string, (res: ServerResponse) => void>()
/** The signature headers of each rental's first delivery (the shared receiver keeps ids and bodies). */
const signed = new Map<string, Record<string, string>>()
const receiver = await sharedReceiver(t, (req: IncomingMessage, res: ServerResponse) => {
  const rentalId = (req.url ?? '').split('/')[2] ?? ''
  if (!signed.has(rentalId)) signed.set(rentalId, Object.fromEntries(['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((h) => [h, String(req.headers[h])])))
  const answer = answers.get(rentalId)
  if (answer === undefined) res.writeHead(204).end()
  else answer(res)
})
const gw = await startTestGateway(t, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_FIRST_MS: '60000', STREAM_HEARTBEAT_MS: '60000' } })

const auth = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })
const bodiesOf = (rentalId: string) => receiver.got.filter((d) => d.path === `/hook/${rentalId}`).map((d) => JSON.parse(d.body))
/** Every request made to the rental's hook with a signal, failed attempts included. */
const signalsOf = (rentalId: string) => bodiesOf(rentalId).filter((b) => b.event === 'byo.signal.accepted')
const attemptsAt = (rentalId: string, signalId: string) => signalsOf(rentalId).filter((e) => e.signal_id === signalId).length

async function pushed(src: Provisioned, overrides: Record<string, unknown> = {}): Promise<string> {
  const body = payload(src.sourceId, overrides)
  const res = await push(gw, src.sign(body))
  if (res.status !== 202) throw new Error(`push: ${res.status} ${JSON.stringify(res.body)}`)
  return body.signal_id as string
}

/** A renter, a rental of a new source, and its webhook at the shared receiver. */
async function rentalWithWebhook(body: Record<string, unknown> = {}) {
  const src = await provision(gw)
  const renter = await renterToken(gw)
  const rentalId = await rent(gw, { renter_id: renter.subject, source_id: src.sourceId })
  const set = await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renter.token, body: { url: `${receiver.base}/hook/${rentalId}`, ...body } })
  if (set.status !== 200) throw new Error(`webhook: ${set.status} ${JSON.stringify(set.body)}`)
  return { src, renter, rentalId, set: set.body.data }
}

t.test('events carry the receipt_id, confidence and note of their signal on the stream, polling and the webhook', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  const stream = streamReader(await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(renter.token)))
  t.teardown(() => stream.cancel())
  const withNote = await pushed(src, { confidence: 42, note: 'a note' })
  const bare = await pushed(src, { confidence: undefined, note: undefined })
  await until(() => signalsOf(rentalId).length === 2, 15_000, 'two deliveries')
  await stream.until(() => stream.state.text.includes(bare))
  const polled = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals`, { token: renter.token })).body.data
  const streamed = stream.state.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
  for (const [channel, events] of [['webhook', signalsOf(rentalId)], ['stream', streamed], ['polling', polled]] as const) {
    const [a, b] = events.filter((e: any) => e.event === 'byo.signal.accepted')
    t.match(a, { signal_id: withNote, receipt_id: receiptIdOf(src.sourceId, withNote), confidence: 42, note: 'a note' }, channel)
    t.match(b, { signal_id: bare, receipt_id: receiptIdOf(src.sourceId, bare), confidence: null, note: null }, channel)
  }
})

t.test('a delivery filter is validated, read back in canonical form and cleared', async (t) => {
  const { renter, rentalId } = await rentalWithWebhook()
  const path = `/v1/rentals/${rentalId}/filter`
  t.same((await call(gw.url, 'GET', path, { token: renter.token })).body.data, { rental_id: rentalId, filter: null }, 'none at first')
  const refused: [unknown, RegExp][] = [
    [{ severity: ['fatal'] }, /not one of the source's severity_levels/],
    [{ severity: [] }, /1 to 16/],
    [{ tokens: Array.from({ length: 101 }, () => SOL_TOKEN) }, /1 to 100/],
    [{ tokens: ['not-a-token'] }, /not a token address/],
    [{ min_confidence: 101 }, /integer from 0 to 100/],
    [{ min_confidence: 1.5 }, /integer from 0 to 100/],
    [{ color: 'red' }, /unknown field "color"/],
    [[1], /must be an object/],
  ]
  for (const [body, why] of refused) {
    const res = await call(gw.url, 'PUT', path, { token: renter.token, body })
    t.equal(res.status, 400, JSON.stringify(body).slice(0, 60))
    t.equal(res.body.error.code, 'invalid_filter')
    t.match(res.body.error.message, why)
  }
  const set = await call(gw.url, 'PUT', path, { token: renter.token, body: { severity: ['critical', 'critical'], tokens: [EVM_TOKEN, EVM_TOKEN.toLowerCase()], min_confidence: 50 } })
  t.equal(set.status, 200)
  t.same(set.body.data.filter, { severity: ['critical'], tokens: [EVM_TOKEN.toLowerCase()], min_confidence: 50 }, 'duplicates folded, the EVM address in lower case')
  t.same((await call(gw.url, 'GET', path, { token: renter.token })).body.data.filter, set.body.data.filter)
  t.same((await call(gw.url, 'GET', `/v1/rentals/${rentalId}`, { token: renter.token })).body.data.filter, set.body.data.filter, 'the rental shows it')
  const other = await renterToken(gw)
  t.equal((await call(gw.url, 'GET', path, { token: other.token })).status, 404, "another renter gets the 404 of a missing rental")
  t.same((await call(gw.url, 'DELETE', path, { token: renter.token })).body.data, { rental_id: rentalId, filter: null })
  t.same((await call(gw.url, 'GET', path, { token: renter.token })).body.data.filter, null)
})

t.test('a filter applies alike to the stream, polling and the webhook, and leaves the delivered events their log ids', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  const before = await pushed(src, { severity: 'info' })
  await until(() => signalsOf(rentalId).length === 1, 15_000, 'the first delivery')
  // Set in mixed case: the signals below carry the address in lower case.
  const filter = await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/filter`, { token: renter.token, body: { severity: ['critical', 'warning'], tokens: [EVM_TOKEN], min_confidence: 50 } })
  t.equal(filter.status, 200)
  const stream = streamReader(await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(renter.token)))
  t.teardown(() => stream.cancel())
  const lower = EVM_TOKEN.toLowerCase()
  const dropped = [
    await pushed(src, { severity: 'info', token: lower }),
    await pushed(src, { severity: 'critical', token: SOL_TOKEN }),
    await pushed(src, { severity: 'critical', token: lower, confidence: 49 }),
    await pushed(src, { severity: 'critical', token: lower, confidence: undefined }),
  ]
  const kept = await pushed(src, { severity: 'warning', token: lower, confidence: 50 })
  const last = await pushed(src, { severity: 'critical', token: EVM_TOKEN, confidence: 99 })
  await until(() => signalsOf(rentalId).some((e) => e.signal_id === last), 15_000, 'the last delivery')
  await stream.until(() => stream.state.text.includes(last))
  const polled = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals`, { token: renter.token })).body.data
  const streamed = stream.state.text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
  const hooked = signalsOf(rentalId)
  t.same(hooked.map((e) => e.signal_id), [before, kept, last], 'the webhook: what passed, after what came before the filter')
  t.same(streamed.map((e) => e.signal_id), [kept, last], 'the stream (replayed from the start): what passes now')
  t.same(polled.map((e: any) => e.signal_id), [kept, last], 'polling')
  for (const id of dropped) t.notOk(stream.state.text.includes(id), 'a filtered signal is on no channel')
  t.same(streamed.map((e) => e.event_id), hooked.slice(1).map((e) => e.event_id), 'the same ids on every channel')
  t.ok(Number(hooked[2].event_id) - Number(hooked[1].event_id) === 1 && Number(hooked[1].event_id) - Number(hooked[0].event_id) === 5, 'ids stay log positions: the filtered ones are skipped, not renumbered')
  const frames = stream.state.text.split('\n\n').filter((f) => f.includes('byo.signal.accepted'))
  t.ok(frames.every((f) => f.startsWith(`id: `)), 'each delivered event keeps its id line')
  const resumed = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?after=${hooked[1].event_id}`, { token: renter.token })).body.data
  t.same(resumed.map((e: any) => e.signal_id), [last], 'resuming from a delivered id goes on from there')
})

t.test('a retry request ends the wait of a parked event at once; health, live notices without an id and /metrics follow the webhook', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  const stream = streamReader(await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(renter.token)))
  t.teardown(() => stream.cancel())
  await stream.until(() => stream.state.text.includes('retry:'))
  answers.set(rentalId, (res) => res.writeHead(503).end())
  const parked = await pushed(src)
  await until(async () => (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data.health.state === 'failing', 15_000, 'failing')
  const failing = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data
  t.match(failing.health, { state: 'failing', since: String, reason: null, last_error: { result: 'http_status', status: 503 } })
  await stream.until(() => stream.state.text.includes('byo.webhook.failing'))
  const notice = stream.state.text.split('\n\n').find((f) => f.includes('event: byo.webhook.failing'))
  t.ok(notice !== undefined, 'the open stream is told')
  t.notOk(notice!.includes('id:'), 'without an id line: the resume point does not move')
  const metrics = parsePrometheusText(await (await fetch(`${gw.url}/metrics`, auth(gw.adminToken))).text())
  t.ok((sampleValue(metrics, 'sgw_webhook_endpoints', { state: 'failing' }) ?? 0) >= 1, 'the gauge counts it')
  t.ok((sampleValue(metrics, 'sgw_webhook_state_changes_total', { to: 'failing' }) ?? 0) >= 1, 'the change is counted')

  answers.delete(rentalId)
  const asked = Date.now()
  const retry = await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/retry`, { token: renter.token })
  t.equal(retry.status, 200)
  t.match(retry.body.data, { rental_id: rentalId, state: 'enabled' })
  await until(() => attemptsAt(rentalId, parked) === 2, 20_000, 'the parked event tried again')
  t.ok(Date.now() - asked < 20_000, 'well before the 60 s wait')
  await until(async () => (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data.health.state === 'healthy', 10_000, 'healthy again')
  const other = await renterToken(gw)
  t.equal((await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/retry`, { token: other.token })).status, 404, 'another renter')
})

t.test('a re-send ends the wait too, and so does setting the URL again', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  answers.set(rentalId, (res) => res.writeHead(500).end())
  const first = await pushed(src)
  await until(() => attemptsAt(rentalId, first) === 1, 15_000, 'the first attempt')
  answers.delete(rentalId)
  const eventId = signalsOf(rentalId).find((e) => e.signal_id === first).event_id
  t.equal((await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/deliveries/${eventId}/resend`, { token: renter.token })).status, 200)
  await until(() => attemptsAt(rentalId, first) >= 2, 20_000, 'tried again before the 60 s wait')
  // Then the re-send itself goes out (a third time), before the receiver fails again.
  await until(() => attemptsAt(rentalId, first) === 3, 20_000, 'the re-send')
  answers.set(rentalId, (res) => res.writeHead(500).end())
  const second = await pushed(src)
  await until(() => attemptsAt(rentalId, second) === 1, 15_000, 'the second event\'s first attempt')
  answers.delete(rentalId)
  t.equal((await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renter.token, body: { url: `${receiver.base}/hook/${rentalId}` } })).status, 200)
  await until(() => attemptsAt(rentalId, second) === 2, 20_000, 'tried again once the URL was set again')
  t.pass('each parked event went out at once')
})

t.test('a filter set while an event is parked skips it; a re-send of that event is delivered whatever the filter', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  answers.set(rentalId, (res) => res.writeHead(500).end())
  const parked = await pushed(src, { severity: 'info' })
  await until(() => receiver.got.some((d) => d.path === `/hook/${rentalId}`), 15_000, 'the first attempt')
  answers.delete(rentalId)
  const next = await pushed(src, { severity: 'critical' })
  t.equal((await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/filter`, { token: renter.token, body: { severity: ['critical'] } })).status, 200)
  await until(() => attemptsAt(rentalId, next) === 1, 20_000, 'the next event, with no wait for the parked one')
  t.equal(attemptsAt(rentalId, parked), 1, 'the parked event was skipped, not tried again')
  const parkedId = JSON.parse(receiver.got.find((d) => d.path === `/hook/${rentalId}`)!.body).event_id
  t.equal((await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/deliveries/${parkedId}/resend`, { token: renter.token })).status, 200)
  await until(() => attemptsAt(rentalId, parked) === 2, 20_000, 'the re-sent event')
  t.pass('delivered as asked')
})

t.test('a receiver answering 410 disables the webhook: the view says why, open streams are told, a retry enables it again', async (t) => {
  const { src, renter, rentalId } = await rentalWithWebhook()
  const stream = streamReader(await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(renter.token)))
  t.teardown(() => stream.cancel())
  await stream.until(() => stream.state.text.includes('retry:'))
  answers.set(rentalId, (res) => res.writeHead(410).end())
  const gone = await pushed(src)
  await until(async () => (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data.state === 'disabled', 15_000, 'disabled')
  const view = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data
  t.match(view.health, { state: 'disabled', since: String, reason: 'gone', last_error: { result: 'gone', status: 410 } })
  await stream.until(() => stream.state.text.includes('byo.webhook.disabled'))
  const notice = stream.state.text.split('\n\n').find((f) => f.includes('event: byo.webhook.disabled'))
  t.ok(notice !== undefined && !notice.includes('id:'), 'told live, without an id line')
  t.match(JSON.parse(notice!.split('data: ')[1]!), { event: 'byo.webhook.disabled', rental_id: rentalId, reason: 'gone' })
  answers.delete(rentalId)
  t.equal((await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/retry`, { token: renter.token })).body.data.state, 'enabled')
  await until(() => attemptsAt(rentalId, gone) === 2, 20_000, 'the event tried again once enabled')
  t.pass()
})

t.test('scheme v1 signs with the webhook\'s own secret, shown once, and the standardwebhooks library verifies real deliveries', async (t) => {
  const { src, renter, rentalId, set } = await rentalWithWebhook({ scheme: 'v1' })
  t.match(set, { scheme: 'v1', secret: /^whsec_[A-Za-z0-9+/]{32}$/ })
  t.equal(set.secret_id, undefined, 'the secret\'s id stays inside')
  const view = (await call(gw.url, 'GET', `/v1/rentals/${rentalId}/webhook`, { token: renter.token })).body.data
  t.equal(view.scheme, 'v1')
  t.notOk('secret' in view || JSON.stringify(view).includes(set.secret.slice(6)), 'never shown again')
  const signalId = await pushed(src)
  await until(() => signalsOf(rentalId).length === 1, 15_000, 'a delivery')
  const delivery = receiver.got.find((d) => d.path === `/hook/${rentalId}`)!
  const sigs = signed.get(rentalId)!
  t.match(sigs['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/, 'one HMAC signature')
  const verified = new Webhook(set.secret).verify(delivery.body, sigs) as any
  t.equal(verified.signal_id, signalId, 'the official library verifies the delivery')
  t.throws(() => new Webhook(set.secret).verify(delivery.body.replace(signalId, `${signalId}x`), sigs), 'a changed body is refused')
  const test = await call(gw.url, 'POST', `/v1/rentals/${rentalId}/webhook/test`, { token: renter.token })
  t.equal(test.body.data.result, 'delivered')
  // Back to v1a: the secret is dropped, the delivery keys sign again.
  const back = await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renter.token, body: { url: `${receiver.base}/hook/${rentalId}`, scheme: 'v1a' } })
  t.match(back.body.data, { scheme: 'v1a' })
  t.equal(back.body.data.secret, undefined)
  const bad = await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renter.token, body: { url: `${receiver.base}/hook/${rentalId}`, scheme: 'v2' } })
  t.equal(bad.status, 400)
  t.equal(bad.body.error.code, 'invalid_request')
})
