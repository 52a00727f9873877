import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer } from 'node:http'
import { createServer, Socket, type AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { Webhook } from 'standardwebhooks'
import { call, MANIFEST, SOL_TOKEN } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { sgwRunner } from '../helpers/sgw-process.js'
import { until } from '../helpers/wait-until.js'
import { parquetReadObjects } from 'hyparquet'

/**
 * `sgw` as a user runs it: `node dist/cli/main.js ...` against one started gateway, its
 * exit codes, --json output and files. Spawns are few (each Node start costs CPU): each
 * subtest runs the commands of one flow.
 */

const gw = await startTestGateway(t, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_RETRY_FIRST_MS: '60000' } })
const dir = mkdtempSync(join(tmpdir(), 'sgw-cli-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const sgw = sgwRunner(gw.url, dir)

const admin = (path: string, body?: unknown) => call(gw.url, 'POST', path, { token: gw.adminToken, body })
writeFileSync(join(dir, 'manifest.json'), JSON.stringify(MANIFEST))

// The operator's part, by the CLI: a creator token (and a usage error), an agent.
const created = await sgw(['token', 'create', '--role', 'creator', '--subject', 'cli_creator', '--json'], { token: gw.adminToken })
const creatorToken = created.json().token as string
await sgw(['agent', 'create', '--agent-id', 'cli_agent', '--creator-id', 'cli_creator', '--slots', '2', '--json'], { token: gw.adminToken })
const renterToken = (await admin('/v1/admin/tokens', { role: 'renter', subject: 'cli_renter' })).body.data.token as string

let sourceId = ''
let keyId = ''

t.test('exit codes: 0 done with --json, 2 usage, 1 refused by the service, 3 unreachable after retries', async (t) => {
  t.equal(created.code, 0)
  t.match(created.json(), { role: 'creator', subject: 'cli_creator', token: /^sgw_/ })
  const usage = await sgw(['token', 'create', '--subject', 'x'], { token: gw.adminToken })
  t.equal(usage.code, 2, 'a missing option')
  t.match(usage.stderr, /--role/)
  const refused = await sgw(['agent', 'create', '--agent-id', 'cli_agent', '--creator-id', 'cli_creator'], { token: gw.adminToken })
  t.equal(refused.code, 1, 'an agent id taken: 409')
  t.match(refused.stderr, /409 already_exists: .*\(request /)
  const closed = createServer()
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
  const port = (closed.address() as AddressInfo).port
  await new Promise((resolve) => closed.close(resolve))
  const unreachable = await sgw(['agent', 'list'], { token: gw.adminToken, url: `http://127.0.0.1:${port}` })
  t.equal(unreachable.code, 3)
  t.match(unreachable.stderr, /still failing after 4 attempts; last: no answer/)
})

t.test('a creator: keygen, source create, key add, promote refused until tested, a test push, promote', async (t) => {
  t.equal((await sgw(['keygen', '--out', 'k1.pem'])).code, 0)
  t.equal((await sgw(['keygen', '--out', 'k1.pem'])).code, 2, 'an existing key file is never overwritten')
  const source = await sgw(['source', 'create', '--agent-id', 'cli_agent', '--manifest', '@manifest.json', '--json'], { token: creatorToken })
  t.equal(source.code, 0, source.stderr)
  sourceId = source.json().source_id
  const key = await sgw(['key', 'add', '--source-id', sourceId, '--key', 'k1.pem', '--json'], { token: creatorToken })
  keyId = key.json().key_id
  t.match(key.json(), { state: 'pending' })
  const early = await sgw(['key', 'promote', '--source-id', sourceId, '--key-id', keyId], { token: creatorToken })
  t.equal(early.code, 1)
  t.match(early.stderr, /key_not_tested/)
  const test = await sgw(['push', '--source-id', sourceId, '--key-id', keyId, '--key', 'k1.pem', '--json', '--signal', JSON.stringify({ signal_id: 'cli_test_0001', token: SOL_TOKEN, severity: 'info' })])
  t.equal(test.code, 0, test.stderr)
  t.match(test.json(), { total: 1, accepted: 1, test: 1, by_status: { '202': 1 } })
  t.equal((await sgw(['key', 'promote', '--source-id', sourceId, '--key-id', keyId], { token: creatorToken })).code, 0)
})

let rentalId = ''

t.test('push NDJSON from stdin: a summary by status and code, exit 1 when any line is refused; tail reads them back through the stream', async (t) => {
  const rental = await sgw(['rental', 'create', '--renter-id', 'cli_renter', '--source-id', sourceId, '--json'], { token: gw.adminToken })
  rentalId = rental.json().rental_id
  const lines = Array.from({ length: 20 }, (_, i) => JSON.stringify({ signal_id: `cli_sig_${i}_${Date.now()}`, token: SOL_TOKEN, severity: i === 7 ? 'apocalyptic' : 'warning' }))
  lines.splice(3, 0, 'not json')
  const pushed = await sgw(['push', '--source-id', sourceId, '--key-id', keyId, '--key', 'k1.pem', '--json', '--concurrency', '4'], { stdin: lines.join('\n') + '\n' })
  t.equal(pushed.code, 1, 'two lines refused')
  t.same(pushed.json(), { total: 21, accepted: 19, deduplicated: 0, test: 0, refused: 2, gave_up: 0, by_status: { '202': 19, '400': 1, none: 1 }, by_code: { invalid_severity: 1, invalid_json: 1 } })
  const tail = await sgw(['tail', rentalId, '--max-events', '19', '--json'], { token: renterToken })
  t.equal(tail.code, 0, tail.stderr)
  const events = tail.stdout.trim().split('\n').map((l) => JSON.parse(l))
  t.equal(events.length, 19)
  t.ok(events.every((e) => e.event === 'byo.signal.accepted' && e.rental_id === rentalId))
  const resumed = await sgw(['tail', rentalId, '--max-events', '1', '--last-event-id', events[17].event_id, '--json'], { token: renterToken })
  t.equal(JSON.parse(resumed.stdout).event_id, events[18].event_id, 'resumes right after the id given')
})

t.test('listen forwards events signed v1 with the secret it prints, verified by the standardwebhooks library; verify-webhook checks a real delivery', async (t) => {
  const got: { headers: Record<string, string>; body: string }[] = []
  const receiver = createHttpServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c)).on('end', () => {
      got.push({ headers: req.headers as Record<string, string>, body })
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise((resolve) => receiver.close(resolve)))
  const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`
  const listen = await sgw(['listen', rentalId, '--forward-to', `${base}/local`, '--max-events', '3', '--json'], { token: renterToken })
  t.equal(listen.code, 0, listen.stderr)
  const [first, ...results] = listen.stdout.trim().split('\n').map((l) => JSON.parse(l))
  t.match(first.secret, /^whsec_/)
  t.equal(results.length, 3)
  t.ok(results.every((r) => r.status === 204))
  t.equal(got.length, 3)
  const hook = new Webhook(first.secret)
  for (const d of got) t.equal((hook.verify(d.body, d.headers) as { event: string }).event, 'byo.signal.accepted')
  t.equal(got[0]!.headers['webhook-id'], `msg_${rentalId}_${results[0].event_id}`, 'the webhook-id a delivery carries')

  // A real delivery of the gateway (v1a), then the renter's delivery log and a re-send.
  const set = await call(gw.url, 'PUT', `/v1/rentals/${rentalId}/webhook`, { token: renterToken, body: { url: `${base}/gateway` } })
  t.equal(set.status, 200)
  const before = got.length
  const more = await sgw(['push', '--source-id', sourceId, '--key-id', keyId, '--key', 'k1.pem', '--signal', JSON.stringify({ signal_id: `cli_hook_${Date.now()}`, token: SOL_TOKEN, severity: 'critical' })])
  t.equal(more.code, 0, more.stderr)
  await until(() => got.length > before, 15_000, 'the delivery')
  const delivery = got[before]!
  writeFileSync(join(dir, 'headers.txt'), Object.entries(delivery.headers).map(([k, v]) => `${k}: ${v}`).join('\r\n'))
  writeFileSync(join(dir, 'body.json'), delivery.body)
  writeFileSync(join(dir, 'tampered.json'), delivery.body.replace('critical', 'info'))
  const valid = await sgw(['verify-webhook', '--headers', 'headers.txt', '--body', 'body.json', '--json'])
  t.equal(valid.code, 0, valid.stderr)
  t.match(valid.json(), { valid: true, scheme: 'v1a', id: delivery.headers['webhook-id'] })
  const tampered = await sgw(['verify-webhook', '--headers', 'headers.txt', '--body', 'tampered.json'])
  t.equal(tampered.code, 1)
  t.match(tampered.stdout, /^not valid: invalid_signature: /)
  const log = await sgw(['webhook', 'deliveries', rentalId, '--json'], { token: renterToken })
  t.match(log.json().attempts[0], { result: 'delivered', status: 204 })
  const resend = await sgw(['webhook', 'resend', rentalId, '--event-id', JSON.parse(delivery.body).event_id, '--json'], { token: renterToken })
  t.match(resend.json(), { queued: 1 })
  const unknown = await sgw(['webhook', 'resend', rentalId, '--event-id', '999999999'], { token: renterToken })
  t.equal(unknown.code, 1, 'an event the rental never received: 404')
  const retry = await sgw(['webhook', 'retry', rentalId, '--json'], { token: renterToken })
  t.equal(retry.code, 0, retry.stderr)
  t.match(retry.json(), { rental_id: rentalId, state: 'enabled', retrying: null }, 'nothing waits: the retry route answers with the endpoint\'s state')
  const noHook = await sgw(['webhook', 'retry', 'rnt_none_such_rental_0', '--json'], { token: renterToken })
  t.equal(noHook.code, 1, 'a rental without a webhook (or not the renter\'s): refused, exit 1')
})

t.test('key rotate: a new key tested and promoted, the old one revoked after the wait given', async (t) => {
  const rotated = await sgw(['key', 'rotate', '--source-id', sourceId, '--new-key', 'k2.pem', '--revoke-after', '0', '--json'], { token: creatorToken })
  t.equal(rotated.code, 0, rotated.stderr)
  t.match(rotated.json(), { source_id: sourceId, old_key_id: keyId, old_key_state: 'revoked', key_file: 'k2.pem' })
  const keys = (await call(gw.url, 'GET', `/v1/byo/sources/${sourceId}/keys`, { token: creatorToken })).body.data as { key_id: string; state: string; revocation_reason: string | null }[]
  t.match(keys.find((k) => k.key_id === rotated.json().new_key_id), { state: 'active' })
  t.match(keys.find((k) => k.key_id === keyId), { state: 'revoked', revocation_reason: 'rotation' })
})

/**
 * A proxy to the gateway that cuts the first answer after `cutAfter` bytes of it, as a
 * network failure mid-export would; later connections pass whole.
 */
async function cuttingProxy(cutAfter: number) {
  let cut = false
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    sockets.add(client)
    const upstream = new Socket()
    sockets.add(upstream)
    upstream.connect(gw.port, '127.0.0.1')
    client.pipe(upstream)
    let sent = 0
    const cutThis = !cut
    cut = true
    upstream.on('data', (chunk: Buffer) => {
      if (!cutThis) return void client.write(chunk)
      const room = cutAfter - sent
      if (room > 0) client.write(chunk.subarray(0, room))
      sent += chunk.length
      if (sent >= cutAfter) {
        client.destroy()
        upstream.destroy()
      }
    })
    upstream.on('end', () => client.end())
    for (const s of [client, upstream]) s.on('error', () => undefined)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve) }),
  }
}

t.test('receipts list with a cursor; export after a cut: NDJSON and CSV continue after the last complete row, Parquet starts over', async (t) => {
  await until(async () => ((await call(gw.url, 'GET', `/v1/byo/sources/${sourceId}/receipts?limit=30`, { token: creatorToken })).body.data?.length ?? 0) >= 20, 20_000, 'the receipts recorded')
  const page = await sgw(['receipts', 'list', '--source-id', sourceId, '--limit', '5', '--json'], { token: renterToken })
  t.equal(page.code, 0, page.stderr)
  t.equal(page.json().data.length, 5)
  t.type(page.json().next_cursor, 'string')
  const whole = async (format: string) => Buffer.from(await (await fetch(`${gw.url}/v1/byo/sources/${sourceId}/receipts/export?format=${format}`, { headers: { authorization: `Bearer ${creatorToken}` } })).arrayBuffer())
  for (const format of ['ndjson', 'csv', 'parquet']) {
    const expected = await whole(format)
    // Past the answer's head and into the rows, before the end.
    const proxy = await cuttingProxy(Math.floor(expected.length / 2) + 200)
    const run = await sgw(['receipts', 'export', '--source-id', sourceId, '--format', format, '--out', `r.${format}`, '--json'], { token: creatorToken, url: proxy.url })
    await proxy.close()
    t.equal(run.code, 0, run.stderr)
    t.match(run.stderr, format === 'parquet' ? /starting the Parquet file over/ : /continuing after row \d+/)
    t.equal(run.json().requests, 2)
    if (format === 'parquet') {
      const rows = (await parquetReadObjects({ file: new Uint8Array(readFileSync(join(dir, 'r.parquet'))).buffer })) as { receipt_id: string }[]
      t.same(rows.map((r) => r.receipt_id), ((await parquetReadObjects({ file: new Uint8Array(expected).buffer })) as { receipt_id: string }[]).map((r) => r.receipt_id), 'a whole Parquet file, every row')
    }
    else t.equal(readFileSync(join(dir, `r.${format}`), 'utf8'), expected.toString('utf8'), `${format}: the same file as one uncut export`)
  }
})
