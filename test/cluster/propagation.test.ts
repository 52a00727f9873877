import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { call, payload, provision, push, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rent, renterToken, sseEvents, streamReader, ticketOf } from '../helpers/renter-channels.js'

/**
 * A change acknowledged by one process takes effect on the others, with real processes on
 * one real nats-server: two gateways (A, B) and a delivery process (D), each with its own
 * DATA_DIR. A retirement is acknowledged only once every gateway has seen it (the
 * revocation barrier), so B is asked at once after A's 200. A rental's end and a token's
 * revocation are acknowledged once stored: D learns of them through its watch of the
 * bucket, so D is asked again every 20 ms for up to 5 s, and the assertions say how long
 * it took.
 */

const WITHIN_MS = 5000
const EVERY_MS = 20

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')
const env = { NATS_URL: nats.urls, ADMIN_TOKEN: adminToken }
// D waits no settle time after a rental's end (STREAM_END_SETTLE_MS=0): how soon its streams end is how soon its view of the rental changes.
const [a, b, d] = await Promise.all([
  startTestGateway(t, { env: { ...env, ROLE: 'gateway' }, adminToken }),
  startTestGateway(t, { env: { ...env, ROLE: 'gateway' }, adminToken }),
  startTestGateway(t, { env: { ...env, ROLE: 'delivery', STREAM_END_SETTLE_MS: '0' }, adminToken }),
])
const src = await provision(a)

/**
 * Asks `probe` every EVERY_MS until `done` holds of its answer or WITHIN_MS have passed
 * since `since`; returns the last answer, whether it held, and the ms from `since`.
 */
async function eventually<T>(since: number, probe: () => Promise<T>, done: (answer: T) => boolean): Promise<{ answer: T; held: boolean; ms: number }> {
  for (;;) {
    const answer = await probe()
    const ms = Date.now() - since
    if (done(answer)) return { answer, held: true, ms }
    if (ms >= WITHIN_MS) return { answer, held: false, ms }
    await sleep(EVERY_MS)
  }
}

/** Pushes a signal of `source` through `gw`; its signal_id. */
async function pushOne(gw: LaunchedGateway, source: Provisioned = src): Promise<string> {
  const p = payload(source.sourceId)
  const res = await push(gw, source.sign(p))
  if (res.status !== 202) throw new Error(`push: ${res.status} ${JSON.stringify(res.body)}`)
  return p.signal_id as string
}

/** When a stream ended, counted from the request that changed what it serves. */
function endedWhen(stream: ReturnType<typeof streamReader>, sentAt: number, ackAt: number): string {
  if (!stream.state.ended) return `it was still open ${Date.now() - ackAt} ms after A's 200`
  return `${stream.state.endedAt - sentAt} ms after the request to A was sent (A's 200 came after ${ackAt - sentAt} ms)`
}

/** Reads a stream on D until it ends, whatever the assertions find; cut at the test's end. */
function openStream(t: Test, res: Response): ReturnType<typeof streamReader> {
  const stream = streamReader(res)
  t.teardown(() => stream.cancel())
  return stream
}

const bearer = (token: string, headers: Record<string, string> = {}) => ({ headers: { authorization: `Bearer ${token}`, ...headers } })
/** A stream request's status and error code on D; a stream that opens (200) is cut at once. */
async function refusal(path: string, init: RequestInit = {}): Promise<[number, string | undefined]> {
  const res = await fetch(`${d.url}${path}`, init)
  if (res.status === 200) {
    await res.body?.cancel()
    return [200, undefined]
  }
  return [res.status, ((await res.json()) as any).error?.code]
}
const pollOnD = (token: string, rentalId: string, query = '') => call(d.url, 'GET', `/v1/rentals/${rentalId}/signals${query}`, { token })

/** A renter with a rental of `src` made through A, once D knows both (a poll of it on D answers 200). */
async function rentalKnownToD(t: Test): Promise<{ renter: Awaited<ReturnType<typeof renterToken>>; rentalId: string }> {
  const renter = await renterToken(a)
  const rentalId = await rent(a, { renter_id: renter.subject, source_id: src.sourceId })
  const known = await eventually(Date.now(), () => pollOnD(renter.token, rentalId), (res) => res.status === 200)
  t.ok(known.held, `D knows the renter token and the rental made through A (${known.ms} ms; last answer ${known.answer.status})`)
  return { renter, rentalId }
}

t.test('a source retired through A: B refuses its pushes as soon as A has answered', async (t) => {
  const retiring = await provision(a)
  const taken = await eventually(Date.now(), () => push(b, retiring.sign(payload(retiring.sourceId))), (res) => res.status === 202)
  t.ok(taken.held, `B takes the source's pushes while it is live (${taken.ms} ms after its provisioning)`)
  // Signed before the retirement, sent after it: B's answer depends on its view alone.
  const signed = retiring.sign(payload(retiring.sourceId))
  const retired = await call(a.url, 'POST', `/v1/byo/sources/${retiring.sourceId}/retire`, { token: retiring.creatorToken })
  t.equal(retired.status, 200, 'retired through A')
  const refused = await push(b, signed)
  t.same([refused.status, refused.body.error?.code], [401, 'unknown_key'], 'B refuses the push at once after A answered, as for a source that does not exist')
  const onB = await call(b.url, 'GET', `/v1/byo/sources/${retiring.sourceId}`, { token: retiring.creatorToken })
  t.same([onB.body.data?.state, onB.body.data?.retired_at], ['retired', retired.body.data.retired_at], "B shows the source retired, with A's retired_at")
})

t.test('a rental ended through A: on D its open stream ends with byo.rental.ended, polling ends with it, and nothing after the end reaches it', async (t) => {
  const { renter, rentalId } = await rentalKnownToD(t)
  const before = await pushOne(a)
  const open = openStream(t, await fetch(`${d.url}/v1/rentals/${rentalId}/events`, bearer(renter.token)))
  await open.until(() => open.state.text.includes(before))
  t.ok(open.state.text.includes(before) && !open.state.ended, 'the stream on D is live')

  const sentAt = Date.now()
  const ended = await call(a.url, 'POST', `/v1/admin/rentals/${rentalId}/end`, { token: adminToken })
  const ackAt = Date.now()
  t.same([ended.status, ended.body.data?.state], [200, 'ended'], 'ended through A')
  const polled = eventually(ackAt, () => pollOnD(renter.token, rentalId), (res) => res.body.data?.at(-1)?.event === 'byo.rental.ended')
  // Received after the end: no channel of the rental may carry it.
  const afterEnd = await pushOne(a)
  await open.until(() => false, WITHIN_MS)
  t.ok(open.state.ended, `the open stream on D ended: ${endedWhen(open, sentAt, ackAt)}`)
  const streamed = sseEvents(open.state.text)
  t.same(
    streamed.map((e) => [e.event, e.signal_id ?? e.ended_at]),
    [
      ['byo.signal.accepted', before],
      ['byo.rental.ended', ended.body.data.ended_at],
    ],
    "the stream's events: the signal before the end, then byo.rental.ended with A's ended_at, and nothing after",
  )
  const endEvent = streamed.at(-1)
  t.same([endEvent?.state, endEvent?.rental_id], ['ended', rentalId], 'the end names the rental and its state')
  const { answer: page, held, ms } = await polled
  t.ok(held, `a poll on D ends with byo.rental.ended ${ms} ms after A's 200`)
  t.same(
    page.body.data.map((e: any) => e.event_id),
    streamed.map((e) => e.event_id),
    'the same events, with the same ids',
  )
  t.equal(page.body.next_cursor, endEvent?.event_id, "the poll's cursor is the end's id")

  const later = await pushOne(a)
  const fresh = await fetch(`${d.url}/v1/rentals/${rentalId}/events`, bearer(renter.token))
  t.equal(fresh.status, 200, 'a new stream of the ended rental on D replays it')
  const replay = openStream(t, fresh)
  await replay.until(() => false, WITHIN_MS)
  t.ok(replay.state.ended, 'and closes after its end')
  t.same(sseEvents(replay.state.text), streamed, 'with the same events: neither signal received after the end')
  const resumed = await fetch(`${d.url}/v1/rentals/${rentalId}/events`, bearer(renter.token, { 'last-event-id': endEvent?.event_id ?? '' }))
  t.equal(resumed.status, 204, "a stream resuming from the end's id on D: 204, nothing follows")
  await resumed.body?.cancel()
  const repoll = await pollOnD(renter.token, rentalId)
  t.same(repoll.body.data, page.body.data, 'a poll from the start on D: the same events, none of the signals received after the end')
  t.notOk(JSON.stringify(repoll.body).includes(afterEnd) || JSON.stringify(repoll.body).includes(later), 'neither signal pushed after the end')
  t.same((await pollOnD(renter.token, rentalId, `?after=${endEvent?.event_id}`)).body, { ok: true, data: [], next_cursor: null }, 'a poll after the end: nothing, and no cursor')
})

t.test('a renter token revoked through A: D ends the streams it opened and refuses it on streams, tickets and polling', async (t) => {
  const { renter, rentalId } = await rentalKnownToD(t)
  const before = await pushOne(a)
  const spare = await ticketOf(d, renter.token, rentalId)
  const byToken = openStream(t, await fetch(`${d.url}/v1/rentals/${rentalId}/events`, bearer(renter.token)))
  const byTicket = openStream(t, await fetch(`${d.url}/v1/rentals/${rentalId}/events?ticket=${await ticketOf(d, renter.token, rentalId)}`))
  await byToken.until(() => byToken.state.text.includes(before))
  await byTicket.until(() => byTicket.state.text.includes(before))
  t.ok(byToken.state.text.includes(before) && byTicket.state.text.includes(before), 'both streams on D are live')

  const sentAt = Date.now()
  const revoked = await call(a.url, 'POST', `/v1/admin/tokens/${renter.tokenId}/revoke`, { token: adminToken })
  const ackAt = Date.now()
  t.equal(revoked.status, 200, 'revoked through A')
  const seen = { token: byToken.state.text, ticket: byTicket.state.text }
  const polled = eventually(ackAt, () => pollOnD(renter.token, rentalId), (res) => res.status === 401)
  const afterRevocation = await pushOne(a)
  await byToken.until(() => false, WITHIN_MS)
  await byTicket.until(() => false, WITHIN_MS)
  t.ok(byToken.state.ended, `the stream opened with the token ended: ${endedWhen(byToken, sentAt, ackAt)}`)
  t.ok(byTicket.state.ended, `the stream opened with a ticket of the token ended: ${endedWhen(byTicket, sentAt, ackAt)}`)
  t.equal(byToken.state.text, seen.token, 'nothing was sent on it after the revocation')
  t.equal(byTicket.state.text, seen.ticket, 'nothing was sent on it after the revocation (ticket)')
  t.notOk(byToken.state.text.includes(afterRevocation) || byTicket.state.text.includes(afterRevocation), 'the signal pushed after it is on neither')
  const { answer: poll, held, ms } = await polled
  t.ok(held, `a poll on D with the token is refused ${ms} ms after A's 200`)
  t.same([poll.status, poll.body.error?.code], [401, 'unauthorized'], 'as an unknown token is')
  t.same(await refusal(`/v1/rentals/${rentalId}/events`, bearer(renter.token)), [401, 'unauthorized'], 'a new stream with the token on D')
  t.same(await refusal(`/v1/rentals/${rentalId}/events?ticket=${spare}`), [401, 'unauthorized'], 'a ticket issued to it before the revocation opens nothing on D')
  const newTicket = await call(d.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token: renter.token })
  t.same([newTicket.status, newTicket.body.error?.code], [401, 'unauthorized'], 'and no new ticket is issued to it')
})
