import type { CreatorKey, SignedPush } from './signing.js'
import { signPush } from './signing.js'

export interface GatewayResponse<T = any> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

export interface OnboardOptions {
  readonly adminToken: string
  readonly creatorId: string
  readonly agentId: string
  readonly slots: number
  readonly manifest: unknown
  readonly key: CreatorKey
  /** The test signal signed with the pending key (spec 3.1); its source_id is filled in. */
  readonly testSignal: Record<string, unknown>
  /** Promote the key after its test signal (default true); false leaves it pending and untested. */
  readonly activate?: boolean
}

export interface OnboardedSource {
  readonly creatorToken: string
  readonly sourceId: string
  readonly keyId: string
}

/**
 * A small client for the gateway's HTTP API: JSON requests with a bearer token, signed
 * pushes, and the registration steps of spec section 1 in one call. The tests and the
 * benchmark use it; it is also the walk-through (examples/walkthrough.sh) as code.
 */
export class GatewayClient {
  readonly baseUrl: string

  constructor(baseUrl: string) {
    this.baseUrl = baseUrl.replace(/\/+$/, '')
  }

  async request<T = any>(
    method: string,
    path: string,
    options: { token?: string; body?: unknown; headers?: Record<string, string>; rawBody?: Uint8Array } = {},
  ): Promise<GatewayResponse<T>> {
    const headers: Record<string, string> = { ...options.headers }
    if (options.token !== undefined) headers['authorization'] = `Bearer ${options.token}`
    let body: string | Uint8Array<ArrayBuffer> | undefined = options.rawBody === undefined ? undefined : new Uint8Array(options.rawBody)
    if (options.body !== undefined) {
      body = JSON.stringify(options.body)
      headers['content-type'] ??= 'application/json'
    }
    const res = await fetch(this.baseUrl + path, { method, headers, body })
    const text = await res.text()
    return { status: res.status, headers: res.headers, body: (text === '' ? undefined : JSON.parse(text)) as T }
  }

  /** Sends a push built by `signPush`, byte for byte. */
  push(signed: SignedPush): Promise<GatewayResponse> {
    return this.request('POST', signed.path, { headers: signed.headers, rawBody: signed.body })
  }

  /** Creator token, agent, source, key (pending), test signal, promote: spec section 1, steps 1 to 5. */
  async onboardSource(o: OnboardOptions): Promise<OnboardedSource> {
    const expect = (step: string, res: GatewayResponse, status: number) => {
      if (res.status !== status) throw new Error(`${step}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`)
      return res
    }
    const token = expect('creator token', await this.request('POST', '/v1/admin/tokens', { token: o.adminToken, body: { role: 'creator', subject: o.creatorId } }), 201)
    const creatorToken = token.body.data.token as string
    expect('agent', await this.request('POST', '/v1/admin/agents', { token: o.adminToken, body: { agent_id: o.agentId, creator_id: o.creatorId, slots: o.slots } }), 201)
    const source = expect('source', await this.request('POST', '/v1/byo/sources', { token: creatorToken, body: { agent_id: o.agentId, manifest: o.manifest } }), 201)
    const sourceId = source.body.data.source_id as string
    const key = expect('key', await this.request('POST', `/v1/byo/sources/${sourceId}/keys`, { token: creatorToken, body: { public_key: o.key.publicKeyBase64 } }), 201)
    const keyId = key.body.data.key_id as string
    if (o.activate !== false) {
      const test = await this.push(signPush({ sourceId, keyId, key: o.key, payload: { ...o.testSignal, source_id: sourceId } }))
      if (test.status !== 202 || test.body.test !== true) throw new Error(`test signal: ${test.status} ${JSON.stringify(test.body)}`)
      expect('promote', await this.request('POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/promote`, { token: creatorToken }), 200)
    }
    return { creatorToken, sourceId, keyId }
  }
}
