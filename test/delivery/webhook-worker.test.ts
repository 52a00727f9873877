import { verify } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { Agent } from 'undici'
import { DeliveryKeys, publicKeyOf, signedContent } from '../../delivery/webhooks/delivery-keys.js'
import { guardedConnector } from '../../delivery/webhooks/guarded-connector.js'
import { WebhookSecrets } from '../../delivery/webhooks/webhook-secrets.js'
import { WebhookState, type WebhookEndpoint } from '../../delivery/webhooks/webhook-state.js'
import { systemLookup } from '../../delivery/webhooks/webhook-url.js'
import { WebhookWorkers, type WebhookWorkerOptions } from '../../delivery/webhooks/webhook-worker.js'
import { LiveTail } from '../../delivery/live-tail.js'
import { openJournal, type Journal, type SignalRecord } from '../../pipeline/index.js'
import { noDisputes } from '../helpers/no-disputes.js'
import type { RentalRecord } from '../../rentals/index.js'
import { fileKvBuckets } from '../../storage/index.js'

const RENTAL: RentalRecord = {
  rental_id: 'rnt_test1',
  renter_id: 'renter_a',
  source_id: 'src_a',
  creator_id: 'creator_a',
  state: 'active',
  starts_at: '2020-01-01T00:00:00.000Z',
  expires_at: null,
  ended_at: null,
  end_reason: null,
  created_at: '2020-01-01T00:00:00.000Z',
}

function signal(n: number, more: Partial<SignalRecord> = {}): Uint8Array {
  const record = {
    v: 1, source_id: 'src_a', signal_id: `sig_${String(n).padStart(8, '0')}`, key_id: 'key_a', test: false,
    received_at: new Date().toISOString(), emitted_at: new Date().toISOString(), token: 'So11111111111111111111111111111111111111112',
    severity: 'warning', confidence: 80, note: 'n', idempotency_key: null, body_sha256: 'ab', request_timestamp: new Date().toISOString(),
    nonce: `nonce-${n}`, signature: 'c2ln', body: '{}', ...more,
  }
  return Buffer.from(JSON.stringify(record))
}

interface Received {
  id: string
  timestamp: string
  signature: string
  body: string
}

/** A real HTTP receiver on 127.0.0.1 whose answer to each request the test scripts. */
async function receiver(t: Test, answer: (req: IncomingMessage, res: ServerResponse, body: string, n: number) => void) {
  const got: Received[] = []
  let n = 0
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => (body += c.toString()))
    req.on('end', () => {
      got.push({ id: String(req.headers['webhook-id']), timestamp: String(req.headers['webhook-timestamp']), signature: String(req.headers['webhook-signature']), body })
      answer(req, res, body, ++n)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => { server.closeAllConnections(); server.close(() => resolve()) }))
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got }
}

/** A registry with no accepted dispute (their delivery is tested in dispute-delivery.test.ts). */
const NO_DISPUTES = noDisputes()

async function setup(t: Test, more: Partial<WebhookWorkerOptions> = {}) {
  const dir = await mkdtemp(join(tmpdir(), 'webhook-worker-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const journal: Journal = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  const openBucket = fileKvBuckets({ dir: join(dir, 'kv') })
  const bucket = await openBucket('webhooks', { maxKeys: 1000, maxValueBytes: 512 * 1024 })
  const keysBucket = await openBucket('delivery-keys', DeliveryKeys.bucketLimits)
  const state = new WebhookState(bucket)
  const keys = await DeliveryKeys.open({ bucket: keysBucket })
  const secretsBucket = await openBucket('webhook-secrets', WebhookSecrets.bucketLimits(10))
  const secrets = await WebhookSecrets.open(secretsBucket, (e) => { throw e })
  const dispatcher = new Agent({ connect: guardedConnector({ allowPrivate: true, lookup: systemLookup, timeoutMs: 2000 }) })
  const results: string[] = []
  const errors: unknown[] = []
  const tail = await LiveTail.start(journal, (e) => errors.push(e))
  const workers = () =>
    new WebhookWorkers({
      log: journal, tail, state, keys, secrets, rental: (id) => (id === RENTAL.rental_id ? RENTAL : undefined), disputes: NO_DISPUTES, dispatcher,
      timeoutMs: 400, retryDelaysMs: [50, 100, 150], retryWindowMs: 60_000, disableAfterMs: 60_000,
      onAttempt: (r) => results.push(r), onError: (e) => errors.push(e), ...more,
    })
  let running = workers()
  t.teardown(async () => {
    await running.close()
    await tail.close()
    await dispatcher.close()
    await keys.close()
    await keysBucket.close()
    await secrets.close()
    await secretsBucket.close()
    await bucket.close()
    await journal.close()
  })
  const register = async (url: string) => {
    const at = new Date().toISOString()
    const lastSeq = (await journal.info()).lastSeq
    await state.modifyEndpoint(RENTAL.rental_id, () => ({ rental_id: RENTAL.rental_id, url, start_seq: lastSeq + 1, created_at: at, updated_at: at, state: 'enabled', disabled_reason: null, disabled_at: null, last_success_at: null, failing_since: null }) satisfies WebhookEndpoint)
  }
  const restart = async () => {
    await running.close()
    running = workers()
    await running.start()
  }
  await running.start()
  return { journal, state, keys, results, errors, register, restart, workers: () => running }
}

const until = async (what: () => boolean | Promise<boolean>, ms = 15_000) => {
  const end = Date.now() + ms
  while (!(await what())) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** An independent Standard Webhooks v1a check: node:crypto against a published whpk_ key. */
function verifiesWith(whpk: string, r: Received): boolean {
  return r.signature.split(' ').some((part) => {
    const [version, sig] = part.split(',')
    return version === 'v1a' && verify(null, signedContent(r.id, Number(r.timestamp), r.body), publicKeyOf(whpk), Buffer.from(sig!, 'base64'))
  })
}

t.test('a receiver that fails, times out, answers 429 with Retry-After, then recovers gets every event once by webhook-id, in order, each signature verifying across a key rotation', async (t) => {
  const script = ['500', 'hang', '429', 'ok']
  const rx = await receiver(t, (_req, res, _body, n) => {
    const step = n <= script.length ? script[n - 1] : 'ok'
    if (step === '500') res.writeHead(500).end()
    else if (step === 'hang') setTimeout(() => res.writeHead(200).end(), 1500)
    else if (step === '429') res.writeHead(429, { 'retry-after': '1' }).end()
    else res.writeHead(204).end()
  })
  const s = await setup(t)
  const before = s.keys.published()
  await s.register(rx.url)
  for (let i = 1; i <= 3; i++) await s.journal.append(`d${i}`, signal(i), { sourceId: 'src_a' })
  await s.journal.append('other', signal(99, { source_id: 'src_b' }), { sourceId: 'src_b' })
  await s.journal.append('test', signal(98, { test: true }), { sourceId: 'src_a' })
  await until(() => s.results.filter((r) => r === 'delivered').length >= 2)
  const rotated = await s.keys.rotate(60_000)
  t.equal(rotated.length, 2, 'during the overlap both keys are published')
  t.same(rotated.map((k) => k.state), ['retiring', 'active'])
  for (let i = 4; i <= 5; i++) await s.journal.append(`d${i}`, signal(i), { sourceId: 'src_a' })
  await until(() => s.results.filter((r) => r === 'delivered').length >= 5)

  t.same(s.results.slice(0, 4), ['http_status', 'timeout', 'http_status', 'delivered'])
  const ok = rx.got.filter((_, i) => i >= 3 && (i !== 1))
  const delivered = [...new Map(ok.map((r) => [r.id, r])).values()]
  t.same(delivered.map((r) => JSON.parse(r.body).signal_id), ['sig_00000001', 'sig_00000002', 'sig_00000003', 'sig_00000004', 'sig_00000005'], 'every event, in order, none of another source, no test signal')
  t.equal(new Set(rx.got.slice(0, 4).map((r) => r.id)).size, 1, 'the webhook-id is the same on every retry')
  const first = JSON.parse(rx.got[0]!.body)
  t.same(Object.keys(first).sort(), ['confidence', 'emitted_at', 'event', 'event_id', 'note', 'receipt_id', 'received_at', 'rental_id', 'severity', 'signal_id', 'source_id', 'token'].sort())
  t.equal(first.event, 'byo.signal.accepted')
  t.equal(first.rental_id, 'rnt_test1')
  const oldKey = before[0]!.public_key
  const newKey = rotated.find((k) => k.state === 'active')!.public_key
  t.match(oldKey, /^whpk_/)
  for (const r of rx.got) t.ok(verifiesWith(oldKey, r), `verifies with the first key: ${r.id}`)
  const afterRotation = rx.got.filter((r) => r.signature.includes(' '))
  t.ok(afterRotation.length >= 2, 'deliveries after the rotation carry two signatures')
  for (const r of afterRotation) t.ok(verifiesWith(newKey, r), `verifies with the new key: ${r.id}`)
  const tampered = { ...rx.got[0]!, body: rx.got[0]!.body.replace('warning', 'critical') }
  t.notOk(verifiesWith(oldKey, tampered), 'a changed body does not verify')
  const attempts = await s.state.attempts('rnt_test1')
  t.equal(attempts[attempts.length - 1]!.result, 'http_status')
  t.equal(attempts[attempts.length - 1]!.status, 500)
  t.same(s.errors, [], 'no worker errors')
})

t.test('410 Gone disables the webhook; a redirect is a failure, not followed', async (t) => {
  const rx = await receiver(t, (_req, res, _b, n) => (n === 1 ? res.writeHead(302, { location: 'http://169.254.169.254/' }).end() : res.writeHead(410).end()))
  const s = await setup(t)
  await s.register(rx.url)
  await s.journal.append('g1', signal(1), { sourceId: 'src_a' })
  await until(async () => (await s.state.endpoint('rnt_test1'))?.state === 'disabled')
  const endpoint = await s.state.endpoint('rnt_test1')
  t.equal(endpoint?.disabled_reason, 'gone')
  t.same(s.results, ['redirect', 'gone'])
  t.equal(rx.got.length, 2, 'the redirect target was never called and nothing follows the 410')
  t.same(s.errors, [], 'no worker errors')
})

t.test('a retry waits its delay from the end of the failed attempt, not its start', async (t) => {
  // The first attempt times out (400 ms here, 10 s in service); the first delay (300 ms) must follow it.
  const arrivals: number[] = []
  const rx = await receiver(t, (_req, res, _b, n) => {
    arrivals.push(Date.now())
    if (n > 1) res.writeHead(200).end()
  })
  const s = await setup(t, { retryDelaysMs: [300, 300, 300] })
  await s.register(rx.url)
  await s.journal.append('r1', signal(1), { sourceId: 'src_a' })
  await until(() => s.results.includes('delivered'))
  t.same(s.results, ['timeout', 'delivered'])
  const gap = arrivals[1]! - arrivals[0]!
  // The delay is jittered by ±20 %: at least 240 ms after the 400 ms timeout.
  t.ok(gap >= 400 + 240 - 20, `second attempt ${gap} ms after the first began: the timeout, then the delay`)
})

t.test('an event failing past the retry window is dead-lettered and the next one is delivered', async (t) => {
  const rx = await receiver(t, (_req, res, body) => res.writeHead(body.includes('sig_00000001') ? 500 : 200).end())
  const s = await setup(t, { retryWindowMs: 120 })
  await s.register(rx.url)
  await s.journal.append('x1', signal(1), { sourceId: 'src_a' })
  await s.journal.append('x2', signal(2), { sourceId: 'src_a' })
  await until(() => s.results.includes('delivered'))
  const dead = await s.state.deadLetters('rnt_test1')
  t.equal(dead.length, 1)
  t.equal(dead[0]!.event_id, '1')
  t.equal(dead[0]!.last_error, 'the receiver answered 500')
  t.ok(dead[0]!.attempts >= 2)
  t.same(s.errors, [], 'no worker errors')
})

t.test('an endpoint failing without a success for the configured period is disabled and says so', async (t) => {
  const rx = await receiver(t, (_req, res) => res.writeHead(503).end())
  const s = await setup(t, { disableAfterMs: 200 })
  await s.register(rx.url)
  await s.journal.append('f1', signal(1), { sourceId: 'src_a' })
  await until(async () => (await s.state.endpoint('rnt_test1'))?.state === 'disabled')
  t.equal((await s.state.endpoint('rnt_test1'))?.disabled_reason, 'failing')
  t.ok(rx.got.length >= 2)
  t.same(s.errors, [], 'no worker errors')
})

t.test('a restarted worker resumes at the first event not delivered, with the same webhook-id', async (t) => {
  let fail = true
  const rx = await receiver(t, (_req, res) => res.writeHead(fail ? 500 : 200).end())
  const s = await setup(t, { retryDelaysMs: [300] })
  await s.register(rx.url)
  await s.journal.append('r1', signal(1), { sourceId: 'src_a' })
  await until(() => rx.got.length >= 1)
  await s.restart()
  fail = false
  await s.journal.append('r2', signal(2), { sourceId: 'src_a' })
  await until(() => s.results.filter((r) => r === 'delivered').length >= 2)
  const ids = rx.got.map((r) => r.id)
  t.equal(ids[0], ids[1], 'the retry after the restart carries the first webhook-id')
  t.same([...new Set(ids)].map((id) => id.split('_').pop()), ['1', '2'])
  t.equal((await s.state.pending('rnt_test1')), null)
  t.same(s.errors, [], 'no worker errors')
})
