import { createHash, createPublicKey, verify } from 'node:crypto'
import t, { type Test } from 'tap'
import { parseSignatureHeader } from '../../gateway/ingest-headers.js'
import { generateCreatorKeyPem, loadCreatorKey, PushError, SourceClient, TimeoutError, type RetryEvent } from '@signal-ingest-gateway/sdk'
import { acceptedBody, errorBody, startScriptedServer, type ReceivedRequest, type ScriptedAction } from '../helpers/scripted-server.js'

/**
 * The retry policy against a scripted node:http server (test/helpers/scripted-server.ts):
 * a real HTTP exchange, with the 500s, dropped connections and hangs the gateway cannot
 * be made to produce on cue. test/sdk/gateway-push.test.ts runs the SDK against the gateway.
 */

const key = await loadCreatorKey(generateCreatorKeyPem())
const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.publicKey }, format: 'jwk' })
const SOURCE = 'src_scripted'
let n = 0
const signal = () => ({ signal_id: `sig_retry_${++n}`, ts: new Date().toISOString(), token: 'So11111111111111111111111111111111111111112', severity: 'info' })
/** Fast backoff, so the tests that back off take milliseconds. */
const FAST = { baseDelayMs: 20, factor: 2, maxDelayMs: 100 }

async function scripted(t: Test, script: ScriptedAction[]) {
  const server = await startScriptedServer(script)
  t.teardown(() => server.close())
  const client = new SourceClient({ gatewayUrl: server.url, sourceId: SOURCE, keyId: 'key_1', key, retry: FAST })
  return { server, client }
}

/** Every attempt signed (verified with node:crypto), the same body bytes, a nonce of its own. */
function checkAttempts(t: Test, received: ReceivedRequest[], signalId: string, path = `/v1/byo/sources/${SOURCE}/signals`) {
  const nonces = new Set<string>()
  for (const r of received) {
    t.equal(r.method, 'POST')
    t.equal(r.path, path)
    t.same(r.body, (received[0] as ReceivedRequest).body, 'the same body bytes')
    t.equal(r.headers['idempotency-key'], signalId)
    const h = r.headers as Record<string, string>
    const message = `POST\n${r.path}\n${h['x-svc-timestamp']}\n${h['x-svc-nonce']}\n${createHash('sha256').update(r.body).digest('hex')}`
    t.ok(verify(null, Buffer.from(message), publicKey, parseSignatureHeader(h['x-svc-signature'] as string) as Buffer), 'signed')
    t.ok(Math.abs(Date.parse(h['x-svc-timestamp'] as string) - r.at) < 1000, 'a timestamp of its own send')
    nonces.add(h['x-svc-nonce'] as string)
  }
  t.equal(nonces.size, received.length, 'a fresh nonce per attempt')
}

t.test('a 202 resolves with the accepted body, deduplicated flag included', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, [{ status: 202, body: acceptedBody(s.signal_id, SOURCE, { deduplicated: true }) }])
  const accepted = await client.push(s)
  t.match(accepted, { ok: true, signal_id: s.signal_id, status: 'accepted', deduplicated: true })
  t.equal(server.received.length, 1)
  t.same(JSON.parse(server.received[0]?.body.toString() as string), { ...s, source_id: SOURCE }, 'source_id filled in')
})

t.test('500, 502, a dropped connection and 504 are retried with backoff, the same body re-signed each time', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, [
    { status: 500, body: errorBody('internal_error') },
    { status: 502, body: 'Bad Gateway' },
    'reset',
    { status: 504 },
    { status: 202, body: acceptedBody(s.signal_id, SOURCE) },
  ])
  const events: RetryEvent[] = []
  const accepted = await client.push(s, { onRetry: (e) => events.push(e) })
  t.equal(accepted.signal_id, s.signal_id)
  t.equal(server.received.length, 5)
  checkAttempts(t, server.received, s.signal_id)
  t.same(events.map((e) => e.status), [500, 502, undefined, 504])
  t.equal(events[0]?.errorCode, 'internal_error')
  t.ok(events[2]?.error instanceof Error, 'the dropped connection is reported as an error')
  events.forEach((e, i) => t.ok(e.delayMs >= 0 && e.delayMs < Math.min(100, 20 * 2 ** i), `backoff ${i} under its ceiling`))
})

t.test('503 and 429 wait what Retry-After says (and at most a tenth more)', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, [
    { status: 503, headers: { 'retry-after': '1' }, body: errorBody('overloaded') },
    { status: 429, headers: { 'retry-after': '1' }, body: errorBody('rate_limited') },
    { status: 202, body: acceptedBody(s.signal_id, SOURCE) },
  ])
  await client.push(s)
  const [a, b, c] = server.received as [ReceivedRequest, ReceivedRequest, ReceivedRequest]
  for (const [gap, what] of [
    [b.at - a.at, 'after 503'],
    [c.at - b.at, 'after 429'],
  ] as const) {
    t.ok(gap >= 1000, `${what}: waited ${gap} ms, at least 1000`)
    t.ok(gap < 1100 + 400, `${what}: waited ${gap} ms, not much over 1100`)
  }
  checkAttempts(t, server.received, s.signal_id)
})

for (const [status, code] of [
  [400, 'invalid_severity'],
  [401, 'invalid_signature'],
  [401, 'replayed_nonce'],
  [403, 'forbidden'],
  [404, 'not_found'],
  [409, 'idempotency_conflict'],
  [413, 'payload_too_large'],
] as const) {
  t.test(`${status} ${code} is never retried: a PushError push_refused after one attempt`, async (t) => {
    const { server, client } = await scripted(t, [{ status, body: errorBody(code, 'the reason') }, { status: 202, body: acceptedBody('x', SOURCE) }])
    const err = await client.push(signal()).catch((e: unknown) => e)
    t.ok(err instanceof PushError)
    t.match(err, { code: 'push_refused', status, errorCode: code, errorMessage: 'the reason', requestId: `req_${code}`, attempts: 1 })
    t.match((err as Error).message, new RegExp(`refused after 1 attempt .*last: ${status} ${code}: the reason`))
    t.equal(server.received.length, 1)
  })
}

t.test('a redirect is not followed: the signed POST is not sent anywhere else', async (t) => {
  const { server, client } = await scripted(t, [{ status: 307, headers: { location: '/elsewhere' } }, { status: 202, body: acceptedBody('x', SOURCE) }])
  await t.rejects(client.push(signal()), { code: 'push_refused', status: 307, attempts: 1 })
  t.equal(server.received.length, 1)
})

t.test('the deadline: retryable answers until the next wait would pass it, then push_deadline_exceeded with the last answer', async (t) => {
  const { server, client } = await scripted(t, [{ status: 503, headers: { 'retry-after': '1' }, body: errorBody('overloaded', 'shedding') }])
  const started = Date.now()
  const err = await client.push(signal(), { deadlineMs: 2900 }).catch((e: unknown) => e)
  const took = Date.now() - started
  t.match(err, { code: 'push_deadline_exceeded', status: 503, errorCode: 'overloaded', requestId: 'req_overloaded', attempts: 3 })
  t.match((err as Error).message, /gave up at the deadline after 3 attempts .*last: 503 overloaded: shedding/)
  t.equal(server.received.length, 3)
  // Two 1 s waits and a third attempt (with 900 ms left for its answer on a loaded machine), and no third wait.
  t.ok(took >= 2000 && took < 2900, `gave up at ${took} ms, when the third wait would have passed the 2900 ms deadline`)
})

t.test('an attempt without an answer is cut at attemptTimeoutMs and retried', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, ['hang', { status: 202, body: acceptedBody(s.signal_id, SOURCE) }])
  const events: RetryEvent[] = []
  const started = Date.now()
  await client.push(s, { attemptTimeoutMs: 300, onRetry: (e) => events.push(e) })
  t.ok(Date.now() - started >= 300)
  t.ok(events[0]?.error instanceof TimeoutError)
  t.equal(server.received.length, 2)
})

t.test('a gateway that never answers: the push ends at the deadline, the cause the timeout', async (t) => {
  const { client } = await scripted(t, ['hang'])
  const started = Date.now()
  const err = await client.push(signal(), { deadlineMs: 800, attemptTimeoutMs: 300 }).catch((e: unknown) => e)
  const took = Date.now() - started
  t.match(err, { code: 'push_deadline_exceeded', status: undefined, errorCode: undefined })
  t.ok((err as PushError).cause instanceof TimeoutError)
  t.ok((err as PushError).attempts >= 2)
  t.match((err as Error).message, /last: network error: no answer within \d+ ms/)
  t.ok(took >= 780 && took < 2000, `ended at ${took} ms, not after another attempt's 300 ms timeout and more`)
})

t.test("the caller's AbortSignal ends a push during its wait, with push_aborted", async (t) => {
  const { server, client } = await scripted(t, [{ status: 503, headers: { 'retry-after': '30' }, body: errorBody('overloaded') }])
  const controller = new AbortController()
  const started = Date.now()
  setTimeout(() => controller.abort(), 200)
  const err = await client.push(signal(), { signal: controller.signal }).catch((e: unknown) => e)
  t.match(err, { code: 'push_aborted', status: 503, attempts: 1 })
  t.ok(Date.now() - started < 1000, 'at once, not after Retry-After')
  t.equal(server.received.length, 1)
})

t.test('a 202 whose body cannot be read is retried (the retry is answered as deduplicated)', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, [{ status: 202, body: '{"ok":tr' }, { status: 202, body: acceptedBody(s.signal_id, SOURCE, { deduplicated: true }) }])
  const accepted = await client.push(s)
  t.equal(accepted.deduplicated, true)
  t.equal(server.received.length, 2)
})

t.test('a gateway URL with a path prefix: the request goes to, and signs, the prefixed path', async (t) => {
  const s = signal()
  const server = await startScriptedServer([{ status: 202, body: acceptedBody(s.signal_id, SOURCE) }])
  t.teardown(() => server.close())
  const client = new SourceClient({ gatewayUrl: `${server.url}/ingest/`, sourceId: SOURCE, keyId: 'key_1', key })
  await client.push(s)
  checkAttempts(t, server.received, s.signal_id, `/ingest/v1/byo/sources/${SOURCE}/signals`)
})

t.test('an answer over 64 kB is not read to its end: the attempt counts as failed and is retried', async (t) => {
  const s = signal()
  const { server, client } = await scripted(t, [{ status: 202, body: `"${'x'.repeat(100_000)}"` }, { status: 202, body: acceptedBody(s.signal_id, SOURCE, { deduplicated: true }) }])
  const events: RetryEvent[] = []
  const accepted = await client.push(s, { onRetry: (e) => events.push(e) })
  t.equal(accepted.deduplicated, true)
  t.match(events[0]?.error, { code: 'response_too_large' })
  t.equal(server.received.length, 2)
})
