import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { RUN_MAX_EVENTS } from '../../delivery/webhooks/run-bounds.js'

/**
 * Webhooks across kill -9: a real gateway with a rental's webhook pointing at a real
 * local receiver, signals pushed without pause, the gateway killed with SIGKILL at random
 * moments and restarted on the same DATA_DIR. Every signal that got a 202 must reach the
 * receiver at least once, first arrivals in event-id order, every repeat must carry
 * the webhook-id and body of the first, and a kill re-sends at most the last run of events
 * delivered before it (the position is written per run).
 */

const KILLS = 3
const ENV = { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_FIRST_MS: '50' }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

interface Delivery {
  readonly id: string
  readonly body: string
  readonly eventId: number
  readonly signalId: string
}

t.test('webhooks across kill -9: every 202ed signal arrives at least once, in event-id order, repeats with the same webhook-id and body', async (t) => {
  const got: Delivery[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      const event = JSON.parse(body) as { event: string; event_id: string; signal_id: string }
      if (event.event === 'byo.signal.accepted') got.push({ id: String(req.headers['webhook-id']), body, eventId: Number(event.event_id), signalId: event.signal_id })
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  const hook = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`

  const first = await startTestGateway(t, { env: ENV })
  let gw: LaunchedGateway | undefined = first
  const src = await provision(first)
  const renter = (await call(first.url, 'POST', '/v1/admin/tokens', { token: first.adminToken, body: { role: 'renter', subject: 'renter:kill' } })).body.data.token as string
  const rental = (await call(first.url, 'POST', '/v1/admin/rentals', { token: first.adminToken, body: { renter_id: 'renter:kill', source_id: src.sourceId } })).body.data
  const path = `/v1/rentals/${rental.rental_id}/webhook`
  t.equal((await call(first.url, 'PUT', path, { token: renter, body: { url: hook } })).status, 200)

  // Two pushers, never paused: a kill catches some requests in flight (those got no 202 and may or may not be delivered).
  const accepted = new Set<string>()
  let pushing = true
  const pushers = Array.from({ length: 2 }, async () => {
    while (pushing) {
      const target = gw
      if (target === undefined) {
        await sleep(10)
        continue
      }
      const p = payload(src.sourceId)
      try {
        const res = await push(target, src.sign(p))
        if (res.status === 202) accepted.add(p.signal_id as string)
      } catch {
        await sleep(10) // the connection died with the process
      }
    }
  })

  for (let kill = 0; kill < KILLS; kill++) {
    await sleep(250 + Math.random() * 700)
    const victim = gw!
    gw = undefined
    victim.proc.kill('SIGKILL')
    t.equal((await victim.exited()).signal, 'SIGKILL', `kill ${kill + 1}`)
    gw = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken, env: ENV })
  }
  // Enough signals to be worth checking, however slowly a loaded machine accepts them.
  const enough = Date.now() + 20_000
  while (accepted.size <= 30 && Date.now() < enough) await sleep(50)
  await sleep(300)
  pushing = false
  await Promise.all(pushers)
  t.ok(accepted.size > 30, `${accepted.size} signals got a 202`)

  const arrived = () => new Set(got.map((d) => d.signalId))
  const end = Date.now() + 10_000
  while ([...accepted].some((id) => !arrived().has(id)) && Date.now() < end) await sleep(50)
  const missing = [...accepted].filter((id) => !arrived().has(id))
  t.same(missing, [], 'every 202ed signal reached the receiver')

  const firstOf = new Map<number, Delivery>()
  const problems: string[] = []
  for (const d of got) {
    const seen = firstOf.get(d.eventId)
    if (seen === undefined) firstOf.set(d.eventId, d)
    else {
      if (seen.id !== d.id) problems.push(`event ${d.eventId} repeated with webhook-id ${d.id}, first ${seen.id}`)
      if (seen.body !== d.body) problems.push(`event ${d.eventId} repeated with another body`)
    }
  }
  t.same(problems, [], 'every repeat carries the webhook-id and body of the first delivery')
  const order = [...firstOf.keys()]
  t.same(order, [...order].sort((a, b) => a - b), 'first arrivals in event-id order')
  t.ok(got.every((d) => d.id === `msg_${rental.rental_id}_${d.eventId}`), 'webhook-ids derive from the rental and the event id')
  // The position is written per run of events (at most RUN_MAX_EVENTS, about a second), so a
  // kill re-sends at most the run it cut: events delivered before it, in the same order, from
  // the stored position on, before any new one. A re-send cut by the next kill starts over
  // (its run begins again lower), so each repeat run is a slice of the first arrivals that
  // begins within the last RUN_MAX_EVENTS of them; one run per kill at most.
  const runs: number[][] = []
  const firsts: number[] = []
  const seenIds = new Set<number>()
  const runProblems: string[] = []
  const checkRun = (run: number[]) => {
    const start = firsts.indexOf(run[0]!)
    const slice = firsts.slice(start, start + run.length)
    if (start < 0 || start < firsts.length - RUN_MAX_EVENTS || JSON.stringify(slice) !== JSON.stringify(run)) {
      runProblems.push(`repeats ${run.join(',')} are not a run of the last ${RUN_MAX_EVENTS} events delivered before them`)
    }
  }
  let current: number[] | undefined
  for (const d of got) {
    if (seenIds.has(d.eventId)) {
      // A re-send that starts over (the next kill cut the last one) is a run of its own.
      if (current !== undefined && d.eventId <= current[current.length - 1]!) {
        checkRun(current)
        current = undefined
      }
      if (current === undefined) runs.push((current = []))
      current.push(d.eventId)
      continue
    }
    if (current !== undefined) checkRun(current)
    current = undefined
    seenIds.add(d.eventId)
    firsts.push(d.eventId)
  }
  if (current !== undefined) checkRun(current)
  t.same(runProblems, [], `each kill re-sends at most its last run, before any new event: ${runs.map((r) => r.length).join(', ') || 'no'} repeats`)
  t.ok(runs.length <= KILLS, `at most one run of repeats per kill: ${runs.length}`)
  t.comment(`${got.length} deliveries of ${firstOf.size} events; ${got.length - firstOf.size} repeats over ${KILLS} kills`)

  const deliveries = (await call(gw!.url, 'GET', `${path}/deliveries`, { token: renter })).body.data as { attempts: { webhook_id: string; event_id: string; result: string }[]; dead_letters: unknown[] }
  t.same(deliveries.dead_letters, [], 'no dead letters')
  t.ok(deliveries.attempts.length > 0, 'attempts are listed')
  t.same(deliveries.attempts.filter((a) => a.result !== 'delivered' || !firstOf.has(Number(a.event_id)) || a.webhook_id !== firstOf.get(Number(a.event_id))!.id), [], 'every listed attempt is a delivery the receiver got, under its webhook-id')
  t.equal((await call(gw!.url, 'GET', path, { token: renter })).body.data.state, 'enabled', 'the webhook is still enabled')
})
