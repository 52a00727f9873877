import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { apiRequest } from '../../harness/api-request.js'
import { CreatorApiError, CreatorClient, generateCreatorKeyPem, loadCreatorKey, PushError, SourceClient, type RetryEvent } from '@signal-ingest-gateway/sdk'
import { MANIFEST, SOL_TOKEN } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/** The SDK against the real gateway: onboarding with a creator token, pushes, refusals, 429s, a lost answer. */

const gw = await startTestGateway(t)
const dir = mkdtempSync(join(tmpdir(), 'sdk-gw-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))

let n = 0
/** The operator's part (admin token): a creator token and an agent. The SDK has no admin calls. */
async function creatorWithAgent(slots = 3): Promise<{ token: string; agentId: string }> {
  n++
  const creatorId = `sdk_creator_${n}`
  const token = await apiRequest(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject: creatorId } })
  const agent = await apiRequest(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: `sdk_agent_${n}`, creator_id: creatorId, slots } })
  if (token.status !== 201 || agent.status !== 201) throw new Error('admin setup failed')
  return { token: token.body.data.token, agentId: `sdk_agent_${n}` }
}

const signal = (extra: Record<string, unknown> = {}) => ({
  signal_id: `sig_sdk_${++n}_${Date.now().toString(36)}`,
  ts: new Date().toISOString(),
  token: SOL_TOKEN,
  severity: 'warning',
  ...extra,
})

const pemFile = join(dir, 'source-key.pem')
execFileSync('openssl', ['genpkey', '-algorithm', 'ed25519', '-out', pemFile])
const { token, agentId } = await creatorWithAgent()
const creator = new CreatorClient({ gatewayUrl: gw.url, token })
const key = await loadCreatorKey(readFileSync(pemFile, 'utf8'))
const onboarded = await creator.onboardSource({ agentId, manifest: MANIFEST, key, testSignal: { signal_id: 'sig_sdk_test_0001', severity: 'info', token: SOL_TOKEN } })
const sourceId = onboarded.source.source_id

t.test('onboarding with the creator token alone: source, key from the openssl PEM file, test signal, promotion', async (t) => {
  t.equal(onboarded.testAccepted.test, true)
  t.equal(onboarded.source.agent_id, agentId)
  const keys = await creator.listKeys(sourceId)
  t.match(keys, [{ key_id: onboarded.keyId, state: 'active', public_key: key.publicKey }])
  t.equal((await creator.getAgent(agentId)).open_slots, 2)
  t.same((await creator.listSources(agentId)).items.map((s) => s.source_id), [sourceId])
})

t.test('a push is accepted; the same signal again is answered deduplicated', async (t) => {
  const s = signal()
  const first = await onboarded.client.push(s)
  t.match(first, { ok: true, signal_id: s.signal_id, source_id: sourceId, status: 'accepted' })
  t.equal(first.deduplicated, undefined)
  const again = await onboarded.client.push(s)
  t.equal(again.deduplicated, true)
  t.equal(again.received_at, first.received_at)
  t.match(await creator.getSignal(sourceId, s.signal_id), { signal_id: s.signal_id, state: 'accepted' })
})

t.test('a refused signal ends the push at once, and the ingest-error list shows it under the same request id', async (t) => {
  const err = await onboarded.client.push(signal({ severity: 'apocalyptic' })).catch((e: unknown) => e)
  t.ok(err instanceof PushError)
  t.match(err, { code: 'push_refused', status: 400, errorCode: 'invalid_severity', attempts: 1 })
  const errors = await creator.listIngestErrors(sourceId, { limit: 10 })
  t.match(errors.items[0], { request_id: (err as PushError).requestId, status: 400, code: 'invalid_severity', key_id: onboarded.keyId })
  const reused = await onboarded.client.push({ ...signal(), signal_id: 'sig_sdk_test_0001', severity: 'critical' }).catch((e: unknown) => e)
  t.match(reused, { code: 'push_refused', status: 409, errorCode: 'idempotency_conflict', attempts: 1 }, 'a signal_id reused with another body')
})

t.test('key rotation with a key on the @noble/ed25519 backend, then the old key revoked is refused without retry', async (t) => {
  const nobleKey = await loadCreatorKey(generateCreatorKeyPem(), { backend: 'noble' })
  t.equal(nobleKey.backend, 'noble')
  const rotated = await creator.addKey({ sourceId, key: nobleKey, testSignal: { signal_id: 'sig_sdk_test_0002', severity: 'info', token: SOL_TOKEN } })
  t.equal(rotated.testAccepted.test, true)
  t.equal((await rotated.client.push(signal())).status, 'accepted')
  await creator.revokeKey(sourceId, onboarded.keyId)
  const err = await onboarded.client.push(signal()).catch((e: unknown) => e)
  t.match(err, { code: 'push_refused', status: 401, errorCode: 'revoked_key', attempts: 1 })
  t.equal((await rotated.client.push(signal())).status, 'accepted', 'the new key still pushes')
})

t.test("another creator's token gets the 404 of a missing source", async (t) => {
  const other = new CreatorClient({ gatewayUrl: gw.url, token: (await creatorWithAgent()).token })
  const err = await other.getSource(sourceId).catch((e: unknown) => e)
  t.ok(err instanceof CreatorApiError)
  t.match(err, { status: 404, errorCode: 'not_found', message: /^get source: 404 not_found/ })
  t.match(await new CreatorClient({ gatewayUrl: gw.url, token: 'not-a-token' }).getAgent(agentId).catch((e: unknown) => e), { status: 401, errorCode: 'unauthorized' })
})

t.test("over the manifest's max_rate the gateway answers 429 with Retry-After, and the SDK waits it out", async (t) => {
  const slow = await creatorWithAgent()
  const slowCreator = new CreatorClient({ gatewayUrl: gw.url, token: slow.token })
  const slowKey = await loadCreatorKey(generateCreatorKeyPem())
  const manifest = { ...MANIFEST, max_rate: { rate: 1, per: 'second', burst: 1 } }
  const { client } = await slowCreator.onboardSource({ agentId: slow.agentId, manifest, key: slowKey, testSignal: { signal_id: 'sig_sdk_test_0003', severity: 'info', token: SOL_TOKEN } })
  const events: RetryEvent[] = []
  const started = Date.now()
  const pushes = [signal(), signal()].map((s) => client.push(s, { onRetry: (e) => events.push(e) }))
  const accepted = await Promise.all(pushes)
  t.equal(accepted.length, 2)
  const limited = events.filter((e) => e.status === 429)
  t.ok(limited.length >= 1, 'at least one 429 on the way')
  for (const e of limited) {
    t.equal(e.errorCode, 'rate_limited')
    t.ok(e.delayMs >= 1000, `waited Retry-After: ${e.delayMs} ms`)
  }
  t.ok(Date.now() - started >= 1000)
})

t.test('an answer lost on the way back: the retry, signed anew, is answered deduplicated and the signal is stored once', async (t) => {
  // A node:http proxy in front of the gateway that drops the connection instead of
  // relaying the first answer: the gateway accepted the signal, the client never heard.
  let requests = 0
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', async () => {
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string' && name !== 'host' && name !== 'connection') headers[name] = value
      const upstream = await fetch(gw.url + req.url, { method: req.method ?? 'POST', headers, body: Buffer.concat(chunks) })
      const text = await upstream.text()
      if (++requests === 1) return void req.socket.destroy()
      res.writeHead(upstream.status, { 'content-type': 'application/json' }).end(text)
    })
  })
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => (proxy.closeAllConnections(), proxy.close(() => resolve()))))
  const proxyKey = await loadCreatorKey(generateCreatorKeyPem())
  const second = await creator.onboardSource({ agentId, manifest: MANIFEST, key: proxyKey, testSignal: { signal_id: 'sig_sdk_test_0004', severity: 'info', token: SOL_TOKEN } })
  const viaProxy = new SourceClient({
    gatewayUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`,
    sourceId: second.source.source_id,
    keyId: second.keyId,
    key: proxyKey,
    retry: { baseDelayMs: 10 },
  })
  const s = signal()
  const events: RetryEvent[] = []
  const accepted = await viaProxy.push(s, { onRetry: (e) => events.push(e) })
  t.equal(requests, 2, 'the gateway got both attempts')
  t.equal(events.length, 1)
  t.ok(events[0]?.error instanceof Error, 'the first attempt ended in a network error')
  t.equal(accepted.deduplicated, true, 'the second was answered from the first')
  t.match(await creator.getSignal(second.source.source_id, s.signal_id), { state: 'accepted' })
  t.same((await creator.listIngestErrors(second.source.source_id)).items, [], 'no refusal: a fresh nonce, not a replay')
})
