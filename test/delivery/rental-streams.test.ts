import { setTimeout as sleep } from 'node:timers/promises'
import { EventSource } from 'eventsource'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { flakyEventSource } from '../helpers/flaky-event-source.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * The renter's channels through a real gateway and a real WHATWG EventSource (the
 * `eventsource` package): streams that are cut at random and resume by themselves with
 * Last-Event-ID, polling, tickets, the per-rental cap, and the rental's end.
 */

let counter = 0
async function renter(gw: LaunchedGateway): Promise<{ token: string; subject: string }> {
  const subject = `renter:${++counter}_${Date.now().toString(36)}`
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  if (res.status !== 201) throw new Error(`renter token: ${res.status}`)
  return { token: res.body.data.token, subject }
}

async function rent(gw: LaunchedGateway, body: Record<string, unknown>): Promise<string> {
  const res = await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body })
  if (res.status !== 201) throw new Error(`rental: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.rental_id
}

/** Every event polling yields, page by page. */
async function pollAll(gw: LaunchedGateway, token: string, rentalId: string, limit = 7): Promise<any[]> {
  const events: any[] = []
  let after: string | null = null
  for (let i = 0; i < 100; i++) {
    const q: string = after === null ? `?limit=${limit}` : `?limit=${limit}&after=${after}`
    const res = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals${q}`, { token })
    if (res.status !== 200) throw new Error(`poll: ${res.status} ${JSON.stringify(res.body)}`)
    events.push(...res.body.data)
    if (res.body.next_cursor === null) break
    after = res.body.next_cursor
  }
  return events
}

t.test('rental event streams and polling', async (t) => {
  const gw = await startTestGateway(t, { env: { STREAM_HEARTBEAT_MS: '300', STREAM_RETRY_MS: '50', STREAM_END_SETTLE_MS: '300', STREAM_MAX_PER_RENTAL: '3' } })
  const src = await provision(gw)
  const alice = await renter(gw)
  const bob = await renter(gw)
  const rentalId = await rent(gw, { renter_id: alice.subject, source_id: src.sourceId })
  const accepted: string[] = []
  const pushOne = async () => {
    const p = payload(src.sourceId)
    const res = await push(gw, src.sign(p))
    if (res.status !== 202) throw new Error(`push: ${res.status}`)
    accepted.push(p.signal_id as string)
  }

  t.test('an EventSource cut at random resumes with Last-Event-ID and receives exactly the accepted sequence', async (t) => {
    const cuts = { count: 0 }
    const es = flakyEventSource(`${gw.url}/v1/rentals/${rentalId}/events`, alice.token, cuts)
    const got: any[] = []
    es.addEventListener('byo.signal.accepted', (e) => got.push({ ...JSON.parse(e.data), lastEventId: e.lastEventId }))
    for (let i = 0; i < 40; i++) {
      await pushOne()
      await sleep(Math.random() * 60)
    }
    const deadline = Date.now() + 20_000
    while (got.length < accepted.length && Date.now() < deadline) await sleep(50)
    await sleep(600) // a duplicate would arrive meanwhile
    es.close()
    t.ok(cuts.count >= 3, `the connection was cut ${cuts.count} times`)
    t.same(got.map((e) => e.signal_id), accepted, 'every accepted signal once, in order')
    for (const e of got) t.equal(e.lastEventId, e.event_id, 'the SSE id is the event_id')
    const ids = got.map((e) => Number(e.event_id))
    t.same(ids, [...ids].sort((a, b) => a - b), 'event ids increase')
    t.same(Object.keys(got[0]).sort(), ['confidence', 'emitted_at', 'event', 'event_id', 'lastEventId', 'note', 'receipt_id', 'received_at', 'rental_id', 'severity', 'signal_id', 'source_id', 'token'])
  })

  t.test('polling yields the same events', async (t) => {
    const events = await pollAll(gw, alice.token, rentalId)
    t.same(events.map((e) => e.signal_id), accepted)
    const page = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?after=${events[9].event_id}&limit=3`, { token: alice.token })
    t.same(page.body.data.map((e: any) => e.signal_id), accepted.slice(10, 13), 'after is exclusive')
    t.equal(page.body.next_cursor, events[12].event_id)
    const caughtUp = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?after=${events[events.length - 1].event_id}`, { token: alice.token })
    t.same(caughtUp.body, { ok: true, data: [], next_cursor: null }, 'caught up: nothing, and no cursor')
  })

  t.test('a resume point replays from there, then the stream goes live', async (t) => {
    const latencyCount = async () => {
      const page = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).text()
      const m = /^sgw_stream_delivery_latency_seconds_count (\d+)$/m.exec(page)
      if (m === null) throw new Error('no sgw_stream_delivery_latency_seconds_count in /metrics')
      return Number(m[1])
    }
    const countBefore = await latencyCount()
    const res = await fetch(`${gw.url}/v1/rentals/${rentalId}/events?last_event_id=${(await pollAll(gw, alice.token, rentalId))[37].event_id}`, { headers: { authorization: `Bearer ${alice.token}` } })
    t.equal(res.status, 200)
    t.match(res.headers.get('content-type'), /^text\/event-stream/)
    t.equal(res.headers.get('cache-control'), 'no-cache')
    t.equal(res.headers.get('x-accel-buffering'), 'no')
    const reader = res.body!.getReader()
    let text = ''
    const readUntil = async (done: (s: string) => boolean) => {
      const deadline = Date.now() + 5000
      while (!done(text) && Date.now() < deadline) {
        const chunk = await reader.read()
        if (chunk.done) break
        text += Buffer.from(chunk.value).toString()
      }
    }
    await readUntil((s) => s.includes(accepted[39] as string))
    t.match(text, /^retry: 50\n\n/, 'the reconnection hint first')
    t.ok(text.includes(accepted[38] as string) && !text.includes(accepted[37] as string), 'replayed after the resume point only')
    t.equal(await latencyCount(), countBefore, 'replayed events are not counted as delivery latency')
    await pushOne()
    await readUntil((s) => s.includes(accepted[40] as string) && s.includes(': ping'))
    t.ok(text.includes(accepted[40] as string), 'then live')
    t.ok(text.includes(': ping\n\n'), 'a heartbeat comment')
    t.match(text, /id: \d+\nevent: byo\.signal\.accepted\ndata: \{/)
    t.equal(await latencyCount(), countBefore + 1, 'the live event is counted once in the delivery latency histogram')
    await reader.cancel()
  })

  t.test('access: another renter gets 404, a creator 403, no token 401; bad input 400', async (t) => {
    for (const path of [`/v1/rentals/${rentalId}/events`, `/v1/rentals/${rentalId}/signals`]) {
      t.equal((await call(gw.url, 'GET', path, { token: bob.token })).status, 404, path)
      t.equal((await call(gw.url, 'GET', path, { token: src.creatorToken })).status, 403, path)
      t.equal((await call(gw.url, 'GET', path)).status, 401, path)
    }
    t.equal((await call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token: bob.token })).status, 404)
    t.equal((await call(gw.url, 'GET', '/v1/rentals/rnt_nope/events', { token: alice.token })).status, 404)
    const bad = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/events`, { token: alice.token, headers: { 'last-event-id': 'abc' } })
    t.equal(bad.status, 400)
    t.match(bad.body.error.message, /Last-Event-ID/)
    for (const [q, field] of [['after=x', /after/], ['limit=0', /limit/], ['limit=1001', /limit/], ['cursor=1', /cursor/]] as const) {
      const res = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?${q}`, { token: alice.token })
      t.equal(res.status, 400, q)
      t.match(res.body.error.message, field)
    }
  })

  t.test('a ticket opens one stream once', async (t) => {
    const issued = await call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token: alice.token })
    t.equal(issued.status, 201)
    t.match(issued.body.data.ticket, /^[A-Za-z0-9_-]{43}$/)
    t.ok(Date.parse(issued.body.data.expires_at) > Date.now())
    const url = `${gw.url}/v1/rentals/${rentalId}/events?ticket=${issued.body.data.ticket}`
    const first = await fetch(url)
    t.equal(first.status, 200)
    await first.body!.cancel()
    const again = await fetch(url)
    t.equal(again.status, 401, 'single use')
    await again.body?.cancel()
    const other = await call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token: alice.token })
    const wrong = await fetch(`${gw.url}/v1/rentals/rnt_other/events?ticket=${other.body.data.ticket}`)
    t.equal(wrong.status, 404, 'a ticket opens its own rental only')
    await wrong.body?.cancel()
  })

  t.test('streams per rental are capped: the next gets 429', async (t) => {
    await sleep(200) // the streams above have given their places back
    // Resumed from the last event: nothing to replay (an id past the log's end would be refused as never sent).
    const last = (await pollAll(gw, alice.token, rentalId)).at(-1).event_id
    const open = await Promise.all([1, 2, 3].map(() => fetch(`${gw.url}/v1/rentals/${rentalId}/events?last_event_id=${last}`, { headers: { authorization: `Bearer ${alice.token}` } })))
    t.same(open.map((r) => r.status), [200, 200, 200])
    const third = await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, { headers: { authorization: `Bearer ${alice.token}` } })
    t.equal(third.status, 429)
    t.equal(third.headers.get('retry-after'), '5')
    await third.body?.cancel()
    for (const r of open) await r.body!.cancel()
  })

  t.test('an ended rental: its stream gets byo.rental.ended last and stops; nothing more is delivered', async (t) => {
    await sleep(300)
    const es = new EventSource(`${gw.url}/v1/rentals/${rentalId}/events?last_event_id=${(await pollAll(gw, alice.token, rentalId)).at(-1).event_id}`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${alice.token}` } }),
    })
    const got: any[] = []
    es.addEventListener('byo.signal.accepted', (e) => got.push(JSON.parse(e.data)))
    es.addEventListener('byo.rental.ended', (e) => got.push(JSON.parse(e.data)))
    await sleep(300)
    await pushOne()
    const ended = await call(gw.url, 'POST', `/v1/admin/rentals/${rentalId}/end`, { token: gw.adminToken })
    t.equal(ended.status, 200)
    const before = accepted.length
    await pushOne()
    const deadline = Date.now() + 5000
    while (got.at(-1)?.event !== 'byo.rental.ended' && Date.now() < deadline) await sleep(50)
    await sleep(500) // EventSource reconnects after the end: the 204 stops it
    t.equal(es.readyState, EventSource.CLOSED, 'the client stopped reconnecting')
    es.close()
    t.same(got.map((e) => e.signal_id ?? e.event), [accepted[before - 1], 'byo.rental.ended'])
    t.match(got.at(-1), { rental_id: rentalId, state: 'ended', ended_at: ended.body.data.ended_at })
    const polled = await pollAll(gw, alice.token, rentalId)
    t.same(polled.map((e) => e.signal_id ?? e.event), [...accepted.slice(0, before), 'byo.rental.ended'], 'polling: the same, the signal after the end left out')
  })

  t.test('an expired rental receives nothing after its expiry; test signals are never delivered', async (t) => {
    const src2 = await provision(gw, { activate: false })
    const expiresAt = new Date(Date.now() + 2500).toISOString()
    const id = await rent(gw, { renter_id: alice.subject, source_id: src2.sourceId, expires_at: expiresAt })
    const res = await push(gw, src2.sign(payload(src2.sourceId)))
    t.equal(res.status, 202)
    t.equal(res.body.test, true, 'a pending key: a test signal')
    await sleep(3000)
    const polled = await pollAll(gw, alice.token, id)
    t.same(polled.map((e) => e.event), ['byo.rental.ended'], 'the test signal is not delivered; the end is')
    t.match(polled[0], { state: 'expired', ended_at: expiresAt })
    const stream = await fetch(`${gw.url}/v1/rentals/${id}/events`, { headers: { authorization: `Bearer ${alice.token}` } })
    const text = await stream.text()
    t.match(text, /event: byo\.rental\.ended/)
    t.notMatch(text, /byo\.signal\.accepted/)
  })
})
