import { createHash } from 'node:crypto'
import { creatorKeyFromSeed, signPush } from '../../sdk/signing.js'
import type { BenchGateway } from './gateway-process.js'
import type { SourceKey } from './protocol.js'

/**
 * Sources for the benchmark, each with its own active key, set up through the
 * control plane exactly as test/helpers/api.ts `provision()` does: creator token,
 * agent, source, key (pending), a test signal signed with the pending key, promote.
 * Keys come from seeds so the load generator can rebuild them from 32 bytes.
 */

/** max_rate at the schema's ceiling, so the rate limiter never answers for the gateway. */
const MANIFEST = {
  archetype: 'wallet-watcher',
  schema_version: '1.0',
  severity_levels: ['info', 'warning', 'critical'],
  max_rate: { rate: 100_000, per: 'second', burst: 100_000 },
  coverage: { chains: ['solana', 'ethereum'], wallet_set_size: 250 },
  contact: 'bench@example.com',
}
const TOKEN = 'So11111111111111111111111111111111111111112'

async function call(gw: BenchGateway, method: string, path: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const init: RequestInit = { method, headers: { authorization: `Bearer ${token}`, ...headers } }
  if (body !== undefined) {
    init.body = body instanceof Buffer ? new Uint8Array(body) : JSON.stringify(body)
    init.headers = { 'content-type': 'application/json', ...init.headers }
  }
  const res = await fetch(gw.url + path, init)
  const text = await res.text()
  return { status: res.status, body: text === '' ? undefined : JSON.parse(text) }
}

function expect(step: string, res: { status: number; body: unknown }, status: number): void {
  if (res.status !== status) throw new Error(`provisioning ${step}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`)
}

async function provisionOne(gw: BenchGateway, tag: string, i: number): Promise<SourceKey> {
  const creatorId = `bench_creator_${tag}_${i}`
  const agentId = `bench_agent_${tag}_${i}`
  const token = await call(gw, 'POST', '/v1/admin/tokens', gw.adminToken, { role: 'creator', subject: creatorId })
  expect('creator token', token, 201)
  const creatorToken = token.body.data.token as string
  expect('agent', await call(gw, 'POST', '/v1/admin/agents', gw.adminToken, { agent_id: agentId, creator_id: creatorId, slots: 2 }), 201)
  const source = await call(gw, 'POST', '/v1/byo/sources', creatorToken, { agent_id: agentId, manifest: MANIFEST })
  expect('source', source, 201)
  const sourceId = source.body.data.source_id as string
  const seed = createHash('sha256').update(`sgw-bench-${tag}-${i}`).digest()
  const key = creatorKeyFromSeed(seed)
  const registered = await call(gw, 'POST', `/v1/byo/sources/${sourceId}/keys`, creatorToken, { public_key: key.publicKeyBase64 })
  expect('key', registered, 201)
  const keyId = registered.body.data.key_id as string
  const test = signPush({
    sourceId,
    keyId,
    key,
    payload: { signal_id: `bench-test-${tag}-${i}`, source_id: sourceId, ts: new Date().toISOString(), token: TOKEN, severity: 'info' },
  })
  expect('test signal', await call(gw, 'POST', test.path, creatorToken, test.body, test.headers), 202)
  expect('promote', await call(gw, 'POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/promote`, creatorToken), 200)
  return { sourceId, keyId, seedBase64: seed.toString('base64') }
}

/** `count` sources with active keys, provisioned one after another (the registry file is rewritten per change). */
export async function provisionSources(gw: BenchGateway, tag: string, count: number): Promise<SourceKey[]> {
  const sources: SourceKey[] = []
  for (let i = 0; i < count; i++) sources.push(await provisionOne(gw, tag, i))
  return sources
}
