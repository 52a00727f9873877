import { generateCreatorKey, signPush, type CreatorKey, type SignedPush } from '../../sdk/signing.js'
import type { GatewayProcess } from './gateway-process.js'

export interface ApiResponse<T = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

/** One JSON request to the gateway. */
export async function call<T = any>(url: string, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string>; rawBody?: Buffer } = {}): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers }
  if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
  let body: Buffer | string | undefined = options.rawBody
  if (options.body !== undefined) {
    body = JSON.stringify(options.body)
    headers['content-type'] ??= 'application/json'
  }
  const res = await fetch(url + path, { method, headers, body: typeof body === "string" || body === undefined ? body : new Uint8Array(body) })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: (text === "" ? undefined : JSON.parse(text)) as T }
}

/** Sends a signed push as built by `signPush`. */
export function push(gw: { url: string }, signed: SignedPush): Promise<ApiResponse> {
  return call(gw.url, 'POST', signed.path, { headers: signed.headers, rawBody: signed.body })
}

export const MANIFEST = {
  archetype: 'wallet-watcher',
  schema_version: '1.0',
  severity_levels: ['info', 'warning', 'critical'],
  max_rate: { rate: 1000, per: 'second', burst: 1000 },
  coverage: { chains: ['solana', 'ethereum'], wallet_set_size: 250 },
  contact: 'ops@example.com',
}

/** A Solana mint and an EIP-55 address that pass token validation. */
export const SOL_TOKEN = 'So11111111111111111111111111111111111111112'
export const EVM_TOKEN = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'

export interface Provisioned {
  readonly creatorToken: string
  readonly agentId: string
  readonly sourceId: string
  readonly keyId: string
  readonly key: CreatorKey
  /** Signs a push for this source with this key. */
  sign(payload: unknown, extra?: { timestamp?: string; nonce?: string; idempotencyKey?: string; keyId?: string; key?: CreatorKey }): SignedPush
}

let counter = 0

/** A valid signal payload for `sourceId`; `overrides` replace or (with undefined) drop fields. */
export function payload(sourceId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  counter++
  const base: Record<string, unknown> = {
    signal_id: `sig_${Date.now().toString(36)}_${counter}_${Math.random().toString(36).slice(2, 8)}`,
    source_id: sourceId,
    ts: new Date().toISOString(),
    token: SOL_TOKEN,
    severity: 'warning',
    confidence: 80,
    note: 'large transfer to a fresh wallet',
  }
  for (const [k, v] of Object.entries(overrides)) {
    if (v === undefined) delete base[k]
    else base[k] = v
  }
  return base
}

/**
 * Creator token, agent, source, and a key taken through its lifecycle: registered
 * (pending), a test signal accepted, promoted to active — unless `activate` is false.
 */
export async function provision(gw: GatewayProcess, options: { manifest?: unknown; activate?: boolean; slots?: number } = {}): Promise<Provisioned> {
  counter++
  const creatorId = `creator_${counter}_${Date.now().toString(36)}`
  const agentId = `agent_${counter}_${Date.now().toString(36)}`
  const token = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject: creatorId } })
  if (token.status !== 201) throw new Error(`token: ${JSON.stringify(token.body)}`)
  const creatorToken = token.body.data.token as string
  const agent = await call(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: agentId, creator_id: creatorId, slots: options.slots ?? 2 } })
  if (agent.status !== 201) throw new Error(`agent: ${JSON.stringify(agent.body)}`)
  const source = await call(gw.url, 'POST', '/v1/byo/sources', { token: creatorToken, body: { agent_id: agentId, manifest: options.manifest ?? MANIFEST } })
  if (source.status !== 201) throw new Error(`source: ${JSON.stringify(source.body)}`)
  const sourceId = source.body.data.source_id as string
  const key = generateCreatorKey()
  const registered = await call(gw.url, 'POST', `/v1/byo/sources/${sourceId}/keys`, { token: creatorToken, body: { public_key: key.publicKeyBase64 } })
  if (registered.status !== 201) throw new Error(`key: ${JSON.stringify(registered.body)}`)
  const keyId = registered.body.data.key_id as string
  const sign: Provisioned['sign'] = (p, extra = {}) =>
    signPush({ sourceId, keyId: extra.keyId ?? keyId, key: extra.key ?? key, payload: p, timestamp: extra.timestamp, nonce: extra.nonce, idempotencyKey: extra.idempotencyKey })
  if (options.activate !== false) {
    const test = await push(gw, sign(payload(sourceId)))
    if (test.status !== 202 || test.body.test !== true) throw new Error(`test signal: ${JSON.stringify(test.body)}`)
    const promoted = await call(gw.url, 'POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/promote`, { token: creatorToken })
    if (promoted.status !== 200) throw new Error(`promote: ${JSON.stringify(promoted.body)}`)
  }
  return { creatorToken, agentId, sourceId, keyId, key, sign }
}
