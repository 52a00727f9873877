import { createHash } from 'node:crypto'
import { GatewayClient, creatorKeyFromSeed } from '../../sdk/index.js'
import type { BenchGateway } from './gateway-process.js'
import type { SourceKey } from './protocol.js'

/**
 * Sources for the benchmark, each with its own active key, set up through the
 * control plane with the SDK's `onboardSource` (creator token, agent, source, key
 * pending, a test signal signed with the pending key, promote), as the tests do.
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

async function provisionOne(gw: BenchGateway, tag: string, i: number): Promise<SourceKey> {
  const seed = createHash('sha256').update(`sgw-bench-${tag}-${i}`).digest()
  const { sourceId, keyId } = await new GatewayClient(gw.url).onboardSource({
    adminToken: gw.adminToken,
    creatorId: `bench_creator_${tag}_${i}`,
    agentId: `bench_agent_${tag}_${i}`,
    slots: 2,
    manifest: MANIFEST,
    key: creatorKeyFromSeed(seed),
    testSignal: { signal_id: `bench-test-${tag}-${i}`, ts: new Date().toISOString(), token: TOKEN, severity: 'info' },
  })
  return { sourceId, keyId, seedBase64: seed.toString('base64') }
}

/** `count` sources with active keys, provisioned one after another (the registry file is rewritten per change). */
export async function provisionSources(gw: BenchGateway, tag: string, count: number): Promise<SourceKey[]> {
  const sources: SourceKey[] = []
  for (let i = 0; i < count; i++) sources.push(await provisionOne(gw, tag, i))
  return sources
}
