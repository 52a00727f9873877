import { verify } from 'node:crypto'
import { mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { newKey } from '../../delivery/webhooks/delivery-key-ring.js'
import { publicKeyOf, signedContent } from '../../delivery/webhooks/delivery-keys.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { embeddedOnlyFromHere } from '../helpers/test-backend.js'

async function renter(gw: LaunchedGateway, subject: string) {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  return { token: res.body.data.token as string, subject }
}

const until = async (what: () => boolean, ms = 20_000) => {
  const end = Date.now() + ms
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 25))
  }
}

t.test('webhooks through the gateway', async (t) => {
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

  const strict = await startTestGateway(t)
  // A test allowance below the default of 10, so the test shows the setting is the one applied.
  const TESTS_PER_MINUTE = 4
  const open = await startTestGateway(t, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_TESTS_PER_MINUTE: String(TESTS_PER_MINUTE) } })

  t.test('a loopback or plain-http URL is refused with 400 invalid_webhook_url saying why, unless private networks are allowed', async (t) => {
    const src = await provision(strict)
    const alice = await renter(strict, 'renter:alice')
    const rental = (await call(strict.url, 'POST', '/v1/admin/rentals', { token: strict.adminToken, body: { renter_id: alice.subject, source_id: src.sourceId } })).body.data
    for (const [url, why] of [[hook, /must use https/], ['https://127.0.0.1/x', /loopback/], ['https://2130706433/x', /loopback/], ['https://[::ffff:169.254.169.254]/', /metadata/], ['https://10.0.0.1/', /private/]] as const) {
      const res = await call(strict.url, 'PUT', `/v1/rentals/${rental.rental_id}/webhook`, { token: alice.token, body: { url } })
      t.equal(res.status, 400, url)
      t.equal(res.body.error.code, 'invalid_webhook_url')
      t.match(res.body.error.message, why)
    }
    const bad = await call(strict.url, 'PUT', `/v1/rentals/${rental.rental_id}/webhook`, { token: alice.token, body: { url: 'https://a.example', extra: 1 } })
    t.equal(bad.status, 400)
    t.equal(bad.body.error.code, 'invalid_request')
  })

  t.test('a renter sets, reads, tests and removes its webhook; deliveries are signed with the published key; another renter gets 404', async (t) => {
    const src = await provision(open)
    const alice = await renter(open, 'renter:alice')
    const bob = await renter(open, 'renter:bob')
    const rental = (await call(open.url, 'POST', '/v1/admin/rentals', { token: open.adminToken, body: { renter_id: alice.subject, source_id: src.sourceId } })).body.data
    const path = `/v1/rentals/${rental.rental_id}/webhook`
    t.equal((await call(open.url, 'GET', path, { token: alice.token })).status, 404, 'no webhook yet')
    const set = await call(open.url, 'PUT', path, { token: alice.token, body: { url: hook } })
    t.equal(set.status, 200)
    t.match(set.body.data, { rental_id: rental.rental_id, url: hook, state: 'enabled' })
    t.equal((await call(open.url, 'GET', path, { token: alice.token })).body.data.url, hook)
    for (const method of ['GET', 'PUT', 'DELETE']) {
      const res = await call(open.url, method, path, { token: bob.token, ...(method === 'PUT' && { body: { url: hook } }) })
      t.equal(res.status, 404, `another renter: ${method}`)
    }
    // Roles that can never hold a rental are refused by role, as on the rental routes: that tells them nothing about this one.
    const scraper = (await call(open.url, 'POST', '/v1/admin/tokens', { token: open.adminToken, body: { role: 'metrics', subject: 'webhook-probe' } })).body.data.token as string
    for (const [role, token] of [['creator', src.creatorToken], ['admin', open.adminToken], ['metrics', scraper]] as const) {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const res = await call(open.url, method, path, { token, ...(method === 'PUT' && { body: { url: hook } }) })
        t.equal(res.status, 403, `${role}: ${method}`)
        t.equal(res.body.error.code, 'forbidden', `${role}: ${method} forbidden`)
      }
    }
    t.equal((await call(open.url, 'GET', path, { token: alice.token })).body.data.url, hook, 'the endpoint is unchanged')

    const keys = await call(open.url, 'GET', '/v1/delivery-keys')
    t.equal(keys.status, 200)
    const whpk = keys.body.data[0].public_key as string
    t.match(whpk, /^whpk_[A-Za-z0-9+/]{43}=$/)

    const test = await call(open.url, 'POST', `${path}/test`, { token: alice.token })
    t.match(test.body.data, { result: 'delivered', status: 200 })
    t.equal(JSON.parse(got.at(-1)!.body).event, 'byo.webhook.test')

    for (let i = 0; i < 3; i++) t.equal((await push(open, src.sign(payload(src.sourceId)))).status, 202)
    await until(() => got.filter((g) => JSON.parse(g.body).event === 'byo.signal.accepted').length >= 3)
    const events = got.filter((g) => JSON.parse(g.body).event === 'byo.signal.accepted')
    for (const g of got) {
      const [v, sig] = g.sig.split(',')
      t.equal(v, 'v1a')
      t.ok(verify(null, signedContent(g.id, Number(g.ts), g.body), publicKeyOf(whpk), Buffer.from(sig!, 'base64')), `signature of ${g.id} verifies`)
    }
    const seqs = events.map((g) => Number(JSON.parse(g.body).event_id))
    t.same(seqs, [...seqs].sort((a, b) => a - b), 'in log order')

    const deliveries = await call(open.url, 'GET', `${path}/deliveries`, { token: alice.token })
    t.equal(deliveries.body.data.attempts.length, 3)
    t.ok(deliveries.body.data.attempts.every((a: { result: string }) => a.result === 'delivered'))

    const resend = await call(open.url, 'POST', `${path}/deliveries/${seqs[0]}/resend`, { token: alice.token })
    t.equal(resend.status, 200)
    await until(() => got.filter((g) => g.id === events[0]!.id).length === 2)
    t.equal((await call(open.url, 'POST', `${path}/deliveries/999999/resend`, { token: alice.token })).status, 404)
    const since = await call(open.url, 'POST', `${path}/resend`, { token: alice.token, body: { since: new Date(Date.now() - 60_000).toISOString() } })
    t.same(since.body.data, { queued: 3 })
    await until(() => got.filter((g) => JSON.parse(g.body).event === 'byo.signal.accepted').length >= 3 + 1 + 3)
    const page = await (await fetch(`${open.url}/metrics`, { headers: { authorization: `Bearer ${open.adminToken}` } })).text()
    t.match(page, /^sgw_webhook_delivery_latency_seconds_count 3$/m, 'each signal\'s first delivery counted once; re-sends and the test request not')

    const rotated = await call(open.url, 'POST', '/v1/admin/delivery-keys/rotate', { token: open.adminToken })
    t.same(rotated.body.data.map((k: { state: string }) => k.state), ['retiring', 'active'])
    t.equal((await call(open.url, 'POST', '/v1/admin/delivery-keys/rotate', { token: alice.token })).status, 403)
    // Each rotation within the overlap adds a key that signs every delivery: the ring stops at 32.
    for (let signing = 2; signing < 32; signing++) t.equal((await call(open.url, 'POST', '/v1/admin/delivery-keys/rotate', { token: open.adminToken })).status, 200)
    const full = await call(open.url, 'POST', '/v1/admin/delivery-keys/rotate', { token: open.adminToken })
    t.equal(full.status, 409, 'a 33rd signing key is refused')
    t.equal(full.body.error.code, 'limit_exceeded')
    t.equal((await call(open.url, 'GET', '/v1/delivery-keys')).body.data.length, 32)

    t.equal((await call(open.url, 'DELETE', path, { token: alice.token })).status, 200)
    t.equal((await call(open.url, 'GET', path, { token: alice.token })).status, 404)
    const orphan = await call(open.url, 'POST', `${path}/resend`, { token: alice.token, body: { since: new Date(Date.now() - 60_000).toISOString() } })
    t.equal(orphan.status, 404, 're-send since a time needs a webhook set: nothing is queued for a later one')
    t.equal(orphan.body.error.code, 'not_found')
    const again = await call(open.url, 'PUT', path, { token: alice.token, body: { url: hook } })
    t.equal(again.status, 200)
    const before = got.length
    await new Promise((r) => setTimeout(r, 1000))
    t.equal(got.length, before, 'a webhook set again starts at the signals accepted from then on')
    t.equal((await call(open.url, 'DELETE', path, { token: alice.token })).status, 200)
  })

  t.test('a webhook URL whose port is outside 1 to 65535 is refused with 400 invalid_webhook_url naming the port', async (t) => {
    const src = await provision(strict)
    const dave = await renter(strict, 'renter:dave')
    const rental = (await call(strict.url, 'POST', '/v1/admin/rentals', { token: strict.adminToken, body: { renter_id: dave.subject, source_id: src.sourceId } })).body.data
    for (const [url, port] of [['https://1.1.1.1:0/', '0'], ['https://1.1.1.1:65536/', '65536']] as const) {
      const res = await call(strict.url, 'PUT', `/v1/rentals/${rental.rental_id}/webhook`, { token: dave.token, body: { url } })
      t.equal(res.status, 400, url)
      t.equal(res.body.error.code, 'invalid_webhook_url')
      t.match(res.body.error.message, `the port ${port} is not a TCP port from 1 to 65535`)
    }
    t.equal((await call(strict.url, 'GET', `/v1/rentals/${rental.rental_id}/webhook`, { token: dave.token })).status, 404, 'nothing was set')
  })

  t.test('test requests: at most WEBHOOK_TESTS_PER_MINUTE a minute per rental, then 429 rate_limited with Retry-After; setting the webhook again does not reset the count', async (t) => {
    const src = await provision(open)
    const erin = await renter(open, 'renter:erin')
    const rent = async () => (await call(open.url, 'POST', '/v1/admin/rentals', { token: open.adminToken, body: { renter_id: erin.subject, source_id: src.sourceId } })).body.data.rental_id as string
    const [first, second] = [await rent(), await rent()]
    for (const id of [first, second]) t.equal((await call(open.url, 'PUT', `/v1/rentals/${id}/webhook`, { token: erin.token, body: { url: hook } })).status, 200)
    const path = `/v1/rentals/${first}/webhook`
    const sent = got.length
    const started = Date.now()
    for (let i = 0; i < TESTS_PER_MINUTE; i++) t.equal((await call(open.url, 'POST', `${path}/test`, { token: erin.token })).status, 200, `test ${i + 1}`)
    const over = await call(open.url, 'POST', `${path}/test`, { token: erin.token })
    t.equal(over.status, 429)
    t.equal(over.body.error.code, 'rate_limited')
    const retryAfter = Number(over.headers.get('retry-after'))
    const elapsed = Math.ceil((Date.now() - started) / 1000)
    t.ok(retryAfter >= 60 - elapsed && retryAfter <= 60, `Retry-After ${retryAfter} s is the time until the first place frees`)
    t.equal(got.length, sent + TESTS_PER_MINUTE, 'the refused request sent nothing')
    t.match(over.body.error.message, `at most ${TESTS_PER_MINUTE} test requests a minute per rental`)
    t.equal((await call(open.url, 'DELETE', path, { token: erin.token })).status, 200)
    t.equal((await call(open.url, 'PUT', path, { token: erin.token, body: { url: hook } })).status, 200)
    t.equal((await call(open.url, 'POST', `${path}/test`, { token: erin.token })).status, 429, 'still refused after the webhook was removed and set again')
    t.equal((await call(open.url, 'POST', `/v1/rentals/${second}/webhook/test`, { token: erin.token })).status, 200, 'another rental has its own allowance')
  })

  t.test('a failed test request names a coarse reason, never the socket error, address or port', async (t) => {
    const src = await provision(open)
    const fay = await renter(open, 'renter:fay')
    const rental = (await call(open.url, 'POST', '/v1/admin/rentals', { token: open.adminToken, body: { renter_id: fay.subject, source_id: src.sourceId } })).body.data
    const probe = createServer()
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
    const closedPort = (probe.address() as AddressInfo).port
    await new Promise<void>((resolve) => probe.close(() => resolve()))
    const path = `/v1/rentals/${rental.rental_id}/webhook`
    t.equal((await call(open.url, 'PUT', path, { token: fay.token, body: { url: `http://127.0.0.1:${closedPort}/hook` } })).status, 200)
    const test = await call(open.url, 'POST', `${path}/test`, { token: fay.token })
    t.equal(test.status, 200)
    t.match(test.body.data, { result: 'connection', status: null, error: 'unreachable' })
    const { result, status, error } = test.body.data
    t.notMatch(JSON.stringify({ result, status, error }), new RegExp(`${closedPort}|127\\.0\\.0\\.1|ECONN`), 'no port, address or socket error')
  })

  t.test('the test request of an ended or expired rental is 409 rental_not_active for its renter, 404 for another renter', async (t) => {
    const src = await provision(open)
    const gus = await renter(open, 'renter:gus')
    const hal = await renter(open, 'renter:hal')
    const rent = async (expiresAt: string | null) => (await call(open.url, 'POST', '/v1/admin/rentals', { token: open.adminToken, body: { renter_id: gus.subject, source_id: src.sourceId, expires_at: expiresAt } })).body.data.rental_id as string
    const expiresAt = Date.now() + 1000
    const [ended, expired] = [await rent(null), await rent(new Date(expiresAt).toISOString())]
    for (const id of [ended, expired]) t.equal((await call(open.url, 'PUT', `/v1/rentals/${id}/webhook`, { token: gus.token, body: { url: hook } })).status, 200)
    t.equal((await call(open.url, 'POST', `/v1/admin/rentals/${ended}/end`, { token: open.adminToken })).status, 200)
    await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now() + 50)))
    const sent = got.length
    for (const id of [ended, expired]) {
      const own = await call(open.url, 'POST', `/v1/rentals/${id}/webhook/test`, { token: gus.token })
      t.equal(own.status, 409, `its renter: ${id}`)
      t.equal(own.body.error.code, 'rental_not_active')
      const other = await call(open.url, 'POST', `/v1/rentals/${id}/webhook/test`, { token: hal.token })
      t.equal(other.status, 404, 'another renter learns nothing of the rental')
      t.equal(other.body.error.code, 'not_found')
    }
    t.equal(got.length, sent, 'nothing was sent')
  })

  t.test('an ended rental: its webhook delivers what was accepted while it was active and nothing after', async (t) => {
    const src = await provision(open)
    const carol = await renter(open, 'renter:carol')
    const rental = (await call(open.url, 'POST', '/v1/admin/rentals', { token: open.adminToken, body: { renter_id: carol.subject, source_id: src.sourceId } })).body.data
    const path = `/v1/rentals/${rental.rental_id}/webhook`
    t.equal((await call(open.url, 'PUT', path, { token: carol.token, body: { url: hook } })).status, 200)
    const mine = () => got.filter((g) => g.body.includes(rental.rental_id) && JSON.parse(g.body).event === 'byo.signal.accepted')
    for (let i = 0; i < 2; i++) t.equal((await push(open, src.sign(payload(src.sourceId)))).status, 202)
    await until(() => mine().length >= 2)
    const ended = await call(open.url, 'POST', `/v1/admin/rentals/${rental.rental_id}/end`, { token: open.adminToken })
    t.equal(ended.status, 200)
    t.equal(ended.body.data.state, 'ended')
    for (let i = 0; i < 3; i++) t.equal((await push(open, src.sign(payload(src.sourceId)))).status, 202)
    await new Promise((r) => setTimeout(r, 1500))
    t.equal(mine().length, 2, 'nothing accepted after the end is delivered')
  })

  t.test('a data folder holding the old delivery-keys.json: its keys move into the delivery-keys bucket and keep signing', async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'webhooks-migrate-'))
    t.teardown(() => rm(dataDir, { recursive: true, force: true }))
    const old = [newKey(Date.now() - 86_400_000)]
    await writeFile(join(dataDir, 'delivery-keys.json'), JSON.stringify({ keys: old }, null, 1), { mode: 0o600 })
    const gw = await startTestGateway(t, { dataDir })
    const keys = await call(gw.url, 'GET', '/v1/delivery-keys')
    t.same(keys.body.data.map((k: { key_id: string; public_key: string }) => [k.key_id, k.public_key]), [[old[0]!.key_id, `whpk_${old[0]!.public_key}`]], 'renters keep the key they verify with')
    await t.rejects(stat(join(dataDir, 'delivery-keys.json')), { code: 'ENOENT' }, 'the file is gone')
    if (embeddedOnlyFromHere(t, "the bucket's folder and file modes: on NATS the keys are in the NATS KV bucket delivery-keys, not under DATA_DIR")) return
    t.equal((await stat(join(dataDir, 'kv', 'delivery-keys'))).mode & 0o777, 0o700, 'the bucket holding the private keys: its folder is the service user\'s only')
    for (const file of await readdir(join(dataDir, 'kv', 'delivery-keys'))) t.equal((await stat(join(dataDir, 'kv', 'delivery-keys', file))).mode & 0o777, 0o600, `${file} mode 600`)
  })
})
