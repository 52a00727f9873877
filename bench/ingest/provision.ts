import { createHash } from 'node:crypto'
import { provisionSource } from '../../harness/provision-source.js'
import type { BenchGateway } from './gateway-process.js'
import type { SourceKey } from './protocol.js'

/**
 * Sources for the benchmark, each with its own active key, set up through the control
 * plane as the tests do (harness/provision-source.ts: creator token and agent with the
 * admin token, then the SDK's `onboardSource`: source, key pending, a test signal signed
 * with the pending key, promote). Keys come from seeds so the load generator can rebuild
 * them from 32 bytes.
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
  const { sourceId, keyId } = await provisionSource(gw, {
    creatorId: `bench_creator_${tag}_${i}`,
    agentId: `bench_agent_${tag}_${i}`,
    slots: 2,
    manifest: MANIFEST,
    seed,
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
