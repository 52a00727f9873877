import { randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { startNatsServer } from '../../harness/nats-launcher.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * The per-rental cap of open event streams holds over the delivery processes of a cluster
 * (built processes on one real nats-server): streams open through one process count
 * against the streams another process admits, a stream closed on one frees its place
 * for the other, and without NATS a stream is refused with 503 rather than let in uncounted.
 */

const nats = await startNatsServer()
t.teardown(() => nats.close())
const adminToken = randomBytes(24).toString('hex')

t.test('STREAM_MAX_PER_RENTAL=2 over two delivery processes on one NATS', async (t) => {
  const env = { NATS_URL: nats.urls, ADMIN_TOKEN: adminToken, STREAM_MAX_PER_RENTAL: '2', STREAM_HEARTBEAT_MS: '1000' }
  // The control plane (sources, tokens, rentals) is the gateway's; the two delivery processes only serve the streams.
  const [gw, one, two] = await Promise.all([
    startTestGateway(t, { env: { ...env, ROLE: 'gateway' }, adminToken }),
    startTestGateway(t, { env: { ...env, ROLE: 'delivery' }, adminToken }),
    startTestGateway(t, { env: { ...env, ROLE: 'delivery' }, adminToken }),
  ])
  const src = await provision(gw)
  const subject = `renter:cap_${Date.now().toString(36)}`
  const token = await call(gw.url, 'POST', '/v1/admin/tokens', { token: adminToken, body: { role: 'renter', subject } })
  t.equal(token.status, 201)
  const rental = await call(gw.url, 'POST', '/v1/admin/rentals', { token: adminToken, body: { renter_id: subject, source_id: src.sourceId } })
  t.equal(rental.status, 201)
  const path = `/v1/rentals/${rental.body.data.rental_id}/events`
  const headers = { authorization: `Bearer ${token.body.data.token}` }
  /** Opens a stream, retrying while the delivery process has not yet seen the token or the rental on NATS (its watch, milliseconds behind). */
  const open = async (url: string): Promise<Response> => {
    const deadline = Date.now() + 5000
    for (;;) {
      const res = await fetch(`${url}${path}`, { headers })
      if ((res.status !== 401 && res.status !== 404) || Date.now() > deadline) return res
      await res.body?.cancel()
      await sleep(20)
    }
  }

  t.test('a third stream is refused on the other process with 429, and a stream closed frees its place there', async (t) => {
    const first = await open(one.url)
    const second = await open(one.url)
    t.same([first.status, second.status], [200, 200], 'two streams through process 1')
    const third = await open(two.url)
    t.equal(third.status, 429, 'the third, through process 2, is over the cap of the rental')
    const refusal = (await third.json()) as { error: { code: string } }
    t.equal(refusal.error.code, 'rate_limited')
    t.ok(Number(third.headers.get('retry-after')) >= 1, 'with Retry-After')

    await first.body?.cancel()
    // Process 1 sees the client leave, gives the place back in the shared record; process 2 admits.
    const deadline = Date.now() + 5000
    let again = await open(two.url)
    while (again.status === 429 && Date.now() < deadline) {
      await again.body?.cancel()
      await sleep(50)
      again = await open(two.url)
    }
    t.equal(again.status, 200, 'the place freed on process 1 is taken on process 2')
    const over = await open(one.url)
    t.equal(over.status, 429, 'and the cap holds again: one stream on each process')
    await over.body?.cancel()
    await second.body?.cancel()
    await again.body?.cancel()
  })

  t.test('without NATS a new stream gets 503 overloaded with Retry-After, never a place uncounted', async (t) => {
    // Without NATS the places cannot be counted: a new stream is refused for now, never let in uncounted.
    await nats.nodes[0]!.stop()
    const started = Date.now()
    const unguarded = await fetch(`${two.url}${path}`, { headers })
    t.equal(unguarded.status, 503, `NATS down: 503 (after ${Date.now() - started} ms)`)
    const down = (await unguarded.json()) as { error: { code: string } }
    t.equal(down.error.code, 'overloaded')
    t.equal(unguarded.headers.get('retry-after'), '1')
  })
})
