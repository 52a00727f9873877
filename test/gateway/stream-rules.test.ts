import { connect } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { call, payload, provision, push } from '../helpers/api.js'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rent, renterToken, streamReader, ticketOf } from '../helpers/renter-channels.js'

/**
 * The rules of the event stream and polling that a black-box probe checked, through a real
 * gateway: revoking a token ends its streams and its tickets, made-up resume points are
 * refused, HEAD counts against the cap, unknown and repeated query parameters are refused,
 * a ticket is spent only by a request that passed every check, tickets are bounded per
 * rental and per renter, the 204's status line, the end event's id, the first heartbeat,
 * and each stream the server closed counted once under its reason in /metrics.
 */

/** The status line of a GET, read off a raw socket. */
function statusLine(port: number, path: string, headers: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ port, host: '127.0.0.1' })
    let data = ''
    const timer = setTimeout(() => {
      socket.destroy()
      reject(new Error(`no status line: ${JSON.stringify(data)}`))
    }, 3000)
    socket.on('data', (d: Buffer) => {
      data += d.toString('latin1')
      const end = data.indexOf('\r\n')
      if (end >= 0) {
        clearTimeout(timer)
        socket.destroy()
        resolve(data.slice(0, end))
      }
    })
    socket.on('error', reject)
    socket.write([`GET ${path} HTTP/1.1`, 'Host: 127.0.0.1', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''].join('\r\n'))
  })
}

t.test('event stream and polling rules', async (t) => {
  const gw = await startTestGateway(t, {
    env: { STREAM_HEARTBEAT_MS: '1500', STREAM_RETRY_MS: '50', STREAM_END_SETTLE_MS: '300', STREAM_MAX_PER_RENTAL: '2', STREAM_TICKETS_MAX_PER_RENTAL: '3', STREAM_TICKETS_MAX_PER_RENTER: '5' },
  })
  const src = await provision(gw)
  const pushOne = async (s = src) => {
    const res = await push(gw, s.sign(payload(s.sourceId)))
    if (res.status !== 202) throw new Error(`push: ${res.status}`)
  }
  const auth = (token: string) => ({ headers: { authorization: `Bearer ${token}` } })

  t.test('revoking a renter token ends its open streams, the ones opened by its tickets too, and its tickets open nothing', async (t) => {
    const alice = await renterToken(gw)
    const rentalId = await rent(gw, { renter_id: alice.subject, source_id: src.sourceId })
    await pushOne()
    const byToken = streamReader(await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(alice.token)))
    const opened = await ticketOf(gw, alice.token, rentalId)
    const byTicketRes = await fetch(`${gw.url}/v1/rentals/${rentalId}/events?ticket=${opened}`)
    t.equal(byTicketRes.status, 200)
    const byTicket = streamReader(byTicketRes)
    const spare = await ticketOf(gw, alice.token, rentalId)
    await byToken.until(() => byToken.state.text.includes('byo.signal.accepted'))
    await byTicket.until(() => byTicket.state.text.includes('byo.signal.accepted'))
    t.equal(byToken.state.ended, false, 'the streams are open')
    const revoked = await call(gw.url, 'POST', `/v1/admin/tokens/${alice.tokenId}/revoke`, { token: gw.adminToken })
    t.equal(revoked.status, 200)
    const before = { token: byToken.state.text.length, ticket: byTicket.state.text.length }
    await pushOne()
    await byToken.until(() => false, 2000)
    await byTicket.until(() => false, 2000)
    t.equal(byToken.state.ended, true, 'the stream opened with the token ended')
    t.equal(byTicket.state.ended, true, 'the stream opened with a ticket of the token ended')
    t.equal(byToken.state.text.length, before.token, 'nothing was sent after the revocation')
    t.equal(byTicket.state.text.length, before.ticket, 'nothing was sent after the revocation (ticket)')
    const late = await fetch(`${gw.url}/v1/rentals/${rentalId}/events?ticket=${spare}`)
    t.equal(late.status, 401, 'a ticket of a revoked token is refused as the token is')
    await late.body?.cancel()
    t.equal((await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, auth(alice.token))).status, 401)
    await byToken.cancel()
    await byTicket.cancel()
  })

  const bob = await renterToken(gw)
  const active = await rent(gw, { renter_id: bob.subject, source_id: src.sourceId })
  await pushOne()
  await pushOne()

  t.test('made-up resume points are refused with 400 naming the problem; the ids sent are accepted', async (t) => {
    const polled = await call(gw.url, 'GET', `/v1/rentals/${active}/signals`, { token: bob.token })
    t.equal(polled.status, 200)
    const sent = polled.body.data.at(-1).event_id as string
    const cases: Array<[string, RegExp]> = [
      ['5.end', /has not ended/],
      ['999999999999999', /past the last event/],
      [`${sent}.d3`, /no dispute event/],
    ]
    for (const [id, why] of cases) {
      for (const [what, res] of [
        ['Last-Event-ID', await call(gw.url, 'GET', `/v1/rentals/${active}/events`, { token: bob.token, headers: { 'last-event-id': id } })],
        ['last_event_id', await call(gw.url, 'GET', `/v1/rentals/${active}/events?last_event_id=${id}`, { token: bob.token })],
        ['after', await call(gw.url, 'GET', `/v1/rentals/${active}/signals?after=${id}`, { token: bob.token })],
      ] as const) {
        t.equal(res.status, 400, `${what}=${id}`)
        t.equal(res.body.error.code, 'invalid_request')
        t.match(res.body.error.message, new RegExp(`${what}.*`), `${what}=${id} names the field`)
        t.match(res.body.error.message, why, `${what}=${id}: ${why}`)
      }
    }
    const ok = await call(gw.url, 'GET', `/v1/rentals/${active}/signals?after=${sent}`, { token: bob.token })
    t.equal(ok.status, 200, 'an id the API sent is accepted')
    const stream = await fetch(`${gw.url}/v1/rentals/${active}/events`, { headers: { authorization: `Bearer ${bob.token}`, 'last-event-id': sent } })
    t.equal(stream.status, 200)
    await stream.body!.cancel()
  })

  t.test('unknown and repeated query parameters are refused on both routes', async (t) => {
    for (const [path, why] of [
      [`/v1/rentals/${active}/events?nope=1`, /unknown query parameter "nope"/],
      [`/v1/rentals/${active}/events?last_event_id=1&last_event_id=2`, /last_event_id is given more than once/],
      [`/v1/rentals/${active}/signals?after=1&after=2`, /after is given more than once/],
      [`/v1/rentals/${active}/signals?limit=1&limit=2`, /limit is given more than once/],
    ] as const) {
      const res = await call(gw.url, 'GET', path, { token: bob.token })
      t.equal(res.status, 400, path)
      t.match(res.body.error.message, why, path)
    }
  })

  t.test('HEAD takes a place like GET: refused with 429 at the cap, and gives its place back', async (t) => {
    await sleep(200)
    const open = await Promise.all([1, 2].map(() => fetch(`${gw.url}/v1/rentals/${active}/events`, auth(bob.token))))
    t.same(open.map((r) => r.status), [200, 200])
    const head = await fetch(`${gw.url}/v1/rentals/${active}/events`, { method: 'HEAD', ...auth(bob.token) })
    t.equal(head.status, 429, 'HEAD at the cap')
    t.equal(head.headers.get('retry-after'), '5')
    await open[0]!.body!.cancel()
    await sleep(300)
    const heads = []
    for (let i = 0; i < 3; i++) heads.push((await fetch(`${gw.url}/v1/rentals/${active}/events`, { method: 'HEAD', ...auth(bob.token) })).status)
    t.same(heads, [200, 200, 200], 'a HEAD under the cap answers 200 and gives its place back')
    const get = await fetch(`${gw.url}/v1/rentals/${active}/events`, auth(bob.token))
    t.equal(get.status, 200, 'the place HEADs took is free')
    await get.body!.cancel()
    await open[1]!.body!.cancel()
  })

  t.test('a ticket is spent only by a request that passed every check', async (t) => {
    await sleep(300)
    const ticket = await ticketOf(gw, bob.token, active)
    const bad = await fetch(`${gw.url}/v1/rentals/${active}/events?ticket=${ticket}&last_event_id=x`)
    t.equal(bad.status, 400, 'a bad resume point')
    const wrong = await fetch(`${gw.url}/v1/rentals/rnt_other/events?ticket=${ticket}`)
    t.equal(wrong.status, 404, 'another rental')
    const full = await Promise.all([1, 2].map(() => fetch(`${gw.url}/v1/rentals/${active}/events`, auth(bob.token))))
    const capped = await fetch(`${gw.url}/v1/rentals/${active}/events?ticket=${ticket}`)
    t.equal(capped.status, 429, 'the cap')
    for (const r of full) await r.body!.cancel()
    await sleep(300)
    const good = await fetch(`${gw.url}/v1/rentals/${active}/events?ticket=${ticket}`)
    t.equal(good.status, 200, 'the ticket still opens its stream')
    await good.body!.cancel()
    const again = await fetch(`${gw.url}/v1/rentals/${active}/events?ticket=${ticket}`)
    t.equal(again.status, 401, 'then it is spent')
    await again.body?.cancel()
  })

  t.test('stream tickets are bounded per rental and per renter: past either 429 with Retry-After, and other renters keep getting theirs', async (t) => {
    const greedy = await renterToken(gw)
    const other = await renterToken(gw)
    const rentals: string[] = []
    for (let i = 0; i < 3; i++) rentals.push(await rent(gw, { renter_id: greedy.subject, source_id: src.sourceId }))
    const [one, two, three] = rentals as [string, string, string]
    const issue = (token: string, rentalId: string) => call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token })
    const held: string[] = []
    for (let i = 0; i < 3; i++) held.push(await ticketOf(gw, greedy.token, one))
    const rentalFull = await issue(greedy.token, one)
    t.equal(rentalFull.status, 429, 'a fourth ticket on the rental')
    t.equal(rentalFull.body.error.code, 'rate_limited')
    t.match(rentalFull.body.error.message, /this rental has the most stream tickets/)
    const wait = Number(rentalFull.headers.get('retry-after'))
    t.ok(wait >= 55 && wait <= 60, `Retry-After ${wait}: until the oldest of the rental's tickets expires (60 s tickets)`)

    const theirs = await rent(gw, { renter_id: other.subject, source_id: src.sourceId })
    t.equal((await issue(other.token, theirs)).status, 201, "another renter's rental still gets tickets")

    t.equal((await issue(greedy.token, two)).status, 201)
    t.equal((await issue(greedy.token, two)).status, 201)
    const renterFull = await issue(greedy.token, three)
    t.equal(renterFull.status, 429, 'a sixth ticket over the renter\'s rentals, on a rental that holds none')
    t.match(renterFull.body.error.message, /you have the most stream tickets/)
    t.ok(Number(renterFull.headers.get('retry-after')) >= 55, 'with Retry-After')
    t.equal((await issue(other.token, theirs)).status, 201, 'the other renter still gets tickets')

    const opened = await fetch(`${gw.url}/v1/rentals/${one}/events?ticket=${held[0]}`)
    t.equal(opened.status, 200, 'a held ticket opens its stream')
    await opened.body!.cancel()
    t.equal((await issue(greedy.token, three)).status, 201, 'and, spent, gives its places back')
  })

  t.test('the first heartbeat comes one interval after the stream opens, not sooner', async (t) => {
    await sleep(300)
    const quiet = await renterToken(gw)
    const src2 = await provision(gw)
    const id = await rent(gw, { renter_id: quiet.subject, source_id: src2.sourceId })
    const opened = Date.now()
    const s = streamReader(await fetch(`${gw.url}/v1/rentals/${id}/events`, auth(quiet.token)))
    await s.until(() => s.state.text.includes(': ping'), 4000)
    const first = Date.now() - opened
    t.ok(s.state.text.includes(': ping'), 'a heartbeat came')
    t.ok(first >= 1400, `the first ping after ${first} ms, not before the 1500 ms interval`)
    t.ok(first < 2600, `and not much after it (${first} ms)`)
    await s.cancel()
  })

  t.test('byo.rental.ended has one id: the last event of the rental, on every channel and at every time', async (t) => {
    const carol = await renterToken(gw)
    const id = await rent(gw, { renter_id: carol.subject, source_id: src.sourceId })
    await pushOne()
    await pushOne()
    const events = (await call(gw.url, 'GET', `/v1/rentals/${id}/signals`, { token: carol.token })).body.data
    const last = events.at(-1).event_id as string
    t.equal((await call(gw.url, 'POST', `/v1/admin/rentals/${id}/end`, { token: gw.adminToken })).status, 200)
    await sleep(500)
    const poll = async (after?: string) => {
      const res = await call(gw.url, 'GET', `/v1/rentals/${id}/signals${after === undefined ? '' : `?after=${after}`}`, { token: carol.token })
      return res.body.data.at(-1)
    }
    const first = await poll()
    t.equal(first.event, 'byo.rental.ended')
    t.equal(first.event_id, `${last}.end`, "the id is the rental's last event's, with .end")
    // The log grows with another source's records and this source's records after the end.
    const other = await provision(gw)
    for (let i = 0; i < 3; i++) await pushOne(other)
    await pushOne()
    t.equal((await poll()).event_id, `${last}.end`, 'polling later: the same id')
    t.equal((await poll(last)).event_id, `${last}.end`, 'polling after the last event: the same id')
    const stream = await (await fetch(`${gw.url}/v1/rentals/${id}/events`, auth(carol.token))).text()
    t.match(stream, new RegExp(`id: ${last.replace('.', '\\.')}\\.end\\nevent: byo\\.rental\\.ended`), 'the stream: the same id')
    const resumed = await (await fetch(`${gw.url}/v1/rentals/${id}/events?last_event_id=${last}`, auth(carol.token))).text()
    t.match(resumed, new RegExp(`id: ${last}\\.end\\n`), 'a stream resumed at the last event: the same id')
    t.equal(await statusLine(gw.port, `/v1/rentals/${id}/events`, { authorization: `Bearer ${carol.token}`, 'last-event-id': `${last}.end` }), 'HTTP/1.1 204 No Content', "a 204's status line")
  })

  t.test('every stream the server closed is counted once under its reason; the ones left by their clients are not', async (t) => {
    const page = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
    const metrics = parsePrometheusText(await page.text())
    const counted = (reason: string) => sampleValue(metrics, 'sgw_stream_disconnects_total', { reason })
    // Two by the revocation (opened with the token, and with its ticket), two by the end (the stream and the resumed one).
    t.equal(counted('token_revoked'), 2, 'token_revoked')
    t.equal(counted('rental_ended'), 2, 'rental_ended')
    for (const reason of ['slow_reader', 'stalled_reader', 'shutdown', 'error']) t.equal(counted(reason), 0, `${reason}: none happened`)
    t.equal(metrics.get('sgw_stream_slow_disconnects_total'), undefined, 'the old slow-only counter is gone')

    const last = await renterToken(gw)
    const id = await rent(gw, { renter_id: last.subject, source_id: src.sourceId })
    const open = [streamReader(await fetch(`${gw.url}/v1/rentals/${id}/events`, auth(last.token))), streamReader(await fetch(`${gw.url}/v1/rentals/${id}/events`, auth(last.token)))]
    for (const s of open) await s.until(() => s.state.text.includes('retry:'))
    await gw.stop()
    for (const s of open) await s.until(() => false, 2000)
    t.same(open.map((s) => s.state.ended), [true, true], 'SIGTERM closes the open streams')
    const line = gw.output.find((l) => l.includes('closed for the shutdown'))
    t.equal(line === undefined ? undefined : JSON.parse(line).streams_closed, 2, 'counted as shutdown, each once')
  })
})
