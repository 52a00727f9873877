import { apiRequest, sendSigned, type GatewayResponse } from '../../harness/api-request.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { provisionSource } from '../../harness/provision-source.js'
import { generateCreatorKey, signPush, type CreatorKey, type SignedPush } from '../../harness/signed-push.js'

export type ApiResponse<T = any> = GatewayResponse<T>

/** One JSON request to the gateway. */
export function call<T = any>(url: string, method: string, path: string, options: { token?: string; body?: unknown; headers?: Record<string, string>; rawBody?: Buffer } = {}): Promise<ApiResponse<T>> {
  return apiRequest<T>(url, method, path, options)
}

/** Sends a signed push as built by `signPush`. */
export function push(gw: { url: string }, signed: SignedPush): Promise<ApiResponse> {
  return sendSigned(gw.url, signed)
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
  readonly creatorId: string
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
 * The creator's steps go through the SDK; `sign` signs synchronously with node:crypto.
 */
export async function provision(gw: LaunchedGateway, options: { manifest?: unknown; activate?: boolean; slots?: number } = {}): Promise<Provisioned> {
  counter++
  const key = generateCreatorKey()
  const suffix = `${counter}_${Date.now().toString(36)}`
  const { creatorToken, sourceId, keyId } = await provisionSource(gw, {
    creatorId: `creator_${suffix}`,
    agentId: `agent_${suffix}`,
    slots: options.slots ?? 2,
    manifest: (options.manifest ?? MANIFEST) as Record<string, unknown>,
    seed: key.seed,
    testSignal: payload('x'),
    ...(options.activate === undefined ? {} : { activate: options.activate }),
  })
  const sign: Provisioned['sign'] = (p, extra = {}) =>
    signPush({ sourceId, keyId: extra.keyId ?? keyId, key: extra.key ?? key, payload: p, timestamp: extra.timestamp, nonce: extra.nonce, idempotencyKey: extra.idempotencyKey })
  return { creatorToken, creatorId: `creator_${suffix}`, agentId: `agent_${suffix}`, sourceId, keyId, key, sign }
}
