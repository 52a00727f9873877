import { CreatorClient, loadCreatorKey } from '@signal-ingest-gateway/sdk'
import { apiRequest, type GatewayResponse } from './api-request.js'

/**
 * A creator with one source and one key, for the tests and the benchmark: the operator's
 * steps with the admin token (a creator token, an agent), then the creator's with the SDK
 * and that token (source, key pending, test signal, promote), as a creator would run them.
 */

export interface ProvisionInput {
  readonly creatorId: string
  readonly agentId: string
  readonly slots: number
  readonly manifest: Record<string, unknown>
  /** The key's 32-byte seed. */
  readonly seed: Uint8Array
  readonly testSignal: Record<string, unknown>
  /** false: the key is registered and left pending, untested. Default true. */
  readonly activate?: boolean
}

export interface ProvisionedSource {
  readonly creatorToken: string
  readonly sourceId: string
  readonly keyId: string
}

export async function provisionSource(gw: { url: string; adminToken: string }, o: ProvisionInput): Promise<ProvisionedSource> {
  const expect = (step: string, res: GatewayResponse, status: number) => {
    if (res.status !== status) throw new Error(`${step}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`)
    return res
  }
  const token = await apiRequest(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject: o.creatorId } })
  const creatorToken = expect('creator token', token, 201).body.data.token as string
  const agent = await apiRequest(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: o.agentId, creator_id: o.creatorId, slots: o.slots } })
  expect('agent', agent, 201)
  const creator = new CreatorClient({ gatewayUrl: gw.url, token: creatorToken })
  const key = await loadCreatorKey(o.seed)
  if (o.activate === false) {
    const source = await creator.createSource({ agentId: o.agentId, manifest: o.manifest })
    const registered = await creator.registerKey(source.source_id, key)
    return { creatorToken, sourceId: source.source_id, keyId: registered.key_id }
  }
  const onboarded = await creator.onboardSource({ agentId: o.agentId, manifest: o.manifest, key, testSignal: o.testSignal })
  return { creatorToken, sourceId: onboarded.source.source_id, keyId: onboarded.keyId }
}
