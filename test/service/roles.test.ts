import { randomBytes } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { launchGateway, type LaunchedGateway } from '../../harness/gateway-launcher.js'
import { DELIVERY_PATHS } from '../../gateway/role-routes.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * ROLE through real processes on one DATA_DIR, one role after another (the embedded
 * backends serve one process at a time): a gateway accepts signals and neither records
 * nor delivers them, and answers the delivery paths with 421 wrong_role; a recorder
 * started later records every one of them; a delivery process started later hands each
 * of them to the renter's polling, stream and webhook, in order.
 */

const SIGNALS = 12
const RECORDER_FLUSH_MS = 100

async function until(what: string, check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await sleep(25)
  }
}

const readyz = async (gw: LaunchedGateway) => (await (await fetch(`${gw.url}/readyz`)).json()) as any

/** The /metrics page, with the admin token: every role serves it. */
async function metricsPage(gw: LaunchedGateway): Promise<string> {
  const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  if (res.status !== 200) throw new Error(`metrics: ${res.status}`)
  return res.text()
}

/** A webhook receiver on 127.0.0.1 that answers 200 and keeps each body. */
async function webhookReceiver(t: Test): Promise<{ url: string; bodies: any[] }> {
  const bodies: any[] = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      bodies.push(JSON.parse(body))
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const address = server.address() as { port: number }
  return { url: `http://127.0.0.1:${address.port}/hook`, bodies }
}

/** The signal ids of the `byo.signal.accepted` events an SSE stream sends, until `count` of them came. */
async function streamed(gw: LaunchedGateway, rentalId: string, token: string, count: number): Promise<string[]> {
  const res = await fetch(`${gw.url}/v1/rentals/${rentalId}/events`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) })
  if (res.status !== 200) throw new Error(`events: ${res.status}`)
  const reader = res.body!.getReader()
  let text = ''
  const ids = () => [...text.matchAll(/event: byo\.signal\.accepted\ndata: (.*)\n/g)].map((m) => JSON.parse(m[1] as string).signal_id as string)
  while (ids().length < count) {
    const chunk = await reader.read()
    if (chunk.done) break
    text += Buffer.from(chunk.value).toString()
  }
  await reader.cancel()
  return ids()
}

t.test('one DATA_DIR, one role after another: gateway accepts, recorder records, delivery delivers', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sgw-roles-'))
  t.teardown(() => rm(dataDir, { recursive: true, force: true }))
  const adminToken = `admin_${randomBytes(16).toString('hex')}`
  const env = { RECORDER_FLUSH_MS: String(RECORDER_FLUSH_MS), WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', STREAM_HEARTBEAT_MS: '200' }
  const start = (role: string) => startTestGateway(t, { dataDir, adminToken, env: { ...env, ROLE: role } })
  const receiver = await webhookReceiver(t)

  // Set up with every role: a source, a renter, a rental, and its webhook (a delivery path).
  let gw = await start('all')
  const src = await provision(gw)
  const subject = `renter:roles_${Date.now().toString(36)}`
  const renterToken = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: adminToken, body: { role: 'renter', subject } })).body.data.token as string
  const rental = await call(gw.url, 'POST', '/v1/admin/rentals', { token: adminToken, body: { renter_id: subject, source_id: src.sourceId } })
  t.equal(rental.status, 201)
  const rentalId = rental.body.data.rental_id as string
  t.equal((await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renterToken, body: { url: receiver.url } })).status, 200)
  await gw.stop()

  const accepted: string[] = []
  t.test('ROLE=gateway accepts signals and neither records nor delivers them', async (t) => {
    gw = await start('gateway')
    t.ok(gw.output.some((l) => l.includes('"gateway ready"') && l.includes('"role":"gateway"')), 'the start line names the role')
    const ready = await readyz(gw)
    t.same(ready.data, { status: 'ready', role: 'gateway', verify_queue: 0 }, '/readyz: the gateway checks, no recorder, no delivery')
    for (let i = 0; i < SIGNALS; i++) {
      const p = payload(src.sourceId)
      const res = await push(gw, src.sign(p))
      t.equal(res.status, 202)
      accepted.push(p.signal_id as string)
    }
    await sleep(RECORDER_FLUSH_MS * 6)
    const receipts = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/receipts`, { token: src.creatorToken })
    t.equal(receipts.status, 200)
    t.same(receipts.body.data, [], 'nothing recorded: no recorder runs here')
    for (const pattern of DELIVERY_PATHS) {
      const path = pattern.replace(':rental_id', rentalId).replace(':event_id', '1')
      for (const method of ['GET', 'POST']) {
        const res = await call(gw.url, method, path, { token: renterToken })
        t.equal(res.status, 421, `${method} ${path}: 421`)
        t.equal(res.body.error.code, 'wrong_role')
        t.match(res.body.error.message, /ROLE=delivery/, 'naming the role that serves it')
      }
    }
    const metrics = await metricsPage(gw)
    t.match(metrics, new RegExp(`^sgw_ingest_accepted_total\\{deduplicated="false"\\} ${SIGNALS}$`, 'm'), 'metrics: the accepts')
    t.notMatch(metrics, /sgw_recorder_lag_records|sgw_streams_open/, 'no recorder or stream metrics')
    t.equal((await call(gw.url, 'GET', '/v1/nope')).status, 404, 'an unknown path is still 404')
    t.same(receiver.bodies, [], 'no webhook delivery')
    await gw.stop()
  })

  t.test('then ROLE=recorder records every one of them, and answers ingest with 421', async (t) => {
    gw = await start('recorder')
    const ingest = await push(gw, src.sign(payload(src.sourceId)))
    t.equal(ingest.status, 421)
    t.equal(ingest.body.error.code, 'wrong_role')
    t.match(ingest.body.error.message, /ROLE=gateway/)
    t.equal((await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals`, { token: renterToken })).status, 421, 'and delivery paths too')
    await until('the recorder caught up', async () => (await readyz(gw)).data.recorder?.state === 'caught_up')
    const ready = await readyz(gw)
    t.same(Object.keys(ready.data).sort(), ['recorder', 'role', 'status'], '/readyz: the recorder only')
    t.equal(ready.data.recorder.lag_records, 0)
    t.match(await metricsPage(gw), /^sgw_recorder_lag_records 0$/m, 'metrics: the recorder\'s lag')
    t.same(receiver.bodies, [], 'no webhook delivery')
    await gw.stop()
  })

  t.test('then ROLE=delivery hands every one to polling, the stream and the webhook, in order', async (t) => {
    gw = await start('delivery')
    const ready = await readyz(gw)
    t.same(ready.data, { status: 'ready', role: 'delivery', delivery: { open_streams: 0 } })
    t.match(await metricsPage(gw), /^sgw_streams_open 0$/m, 'metrics: the streams')
    const polled = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals?limit=1000`, { token: renterToken })
    t.equal(polled.status, 200)
    t.same(polled.body.data.map((e: any) => e.signal_id), accepted, 'polling')
    t.same(await streamed(gw, rentalId, renterToken, SIGNALS), accepted, 'the event stream')
    await until('the webhook received them', async () => receiver.bodies.filter((b) => b.event === 'byo.signal.accepted').length >= SIGNALS)
    t.same(receiver.bodies.filter((b) => b.event === 'byo.signal.accepted').map((b) => b.signal_id), accepted, 'the webhook')
    const ingest = await push(gw, src.sign(payload(src.sourceId)))
    t.equal(ingest.status, 421, 'no ingest here')
    t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/receipts`, { token: src.creatorToken })).status, 421, 'no receipt reads')
    await gw.stop()
  })

  t.test('and a gateway started again reads the receipts the recorder wrote', async (t) => {
    gw = await start('gateway')
    const receipts = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/receipts?limit=1000`, { token: src.creatorToken })
    t.same(receipts.body.data.map((r: any) => r.signal_id).sort(), [...accepted].sort())
  })
})

t.test('an invalid ROLE refuses to start with a configuration error, exit code 78', async (t) => {
  const err = await launchGateway({ env: { ROLE: 'worker' } }).then(
    () => undefined,
    (e: Error) => e,
  )
  t.ok(err, 'not started')
  t.match(err?.message, /exited \(78\)/)
  t.match(err?.message, /configuration error: ROLE="worker" is not valid: .*\(one of all, gateway, recorder, delivery\)/)
})
