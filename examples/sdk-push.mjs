// Onboard a source and push a signal with the creator SDK.
// Run with: GATEWAY_URL, CREATOR_TOKEN (your creator token), AGENT_ID (your agent)
// and KEY_FILE (the PEM file `openssl genpkey -algorithm ed25519` wrote).
import { readFile } from 'node:fs/promises'
import { CreatorClient, loadCreatorKey, PushError, SourceClient } from '@signal-ingest-gateway/sdk'

const gatewayUrl = process.env.GATEWAY_URL
const key = await loadCreatorKey(await readFile(process.env.KEY_FILE, 'utf8'))
const creator = new CreatorClient({ gatewayUrl, token: process.env.CREATOR_TOKEN })

// Once per source: create it under your agent, register the key (pending), push the
// test signal with it, promote it. Keep source_id and keyId for the pushes that follow.
const { source, keyId } = await creator.onboardSource({
  agentId: process.env.AGENT_ID,
  manifest: {
    archetype: 'wallet-watcher',
    schema_version: '1.0',
    severity_levels: ['info', 'warning', 'critical'],
    max_rate: { rate: 10, per: 'second', burst: 20 },
    coverage: { chains: ['solana'], wallet_set_size: 250 },
    contact: 'ops@example.com',
  },
  key,
  testSignal: { signal_id: `test_${Date.now()}`, token: 'So11111111111111111111111111111111111111112', severity: 'info' },
})

// Every push: one signal, retried until accepted, refused, or 30 s have passed.
const client = new SourceClient({ gatewayUrl, sourceId: source.source_id, keyId, key, retry: { deadlineMs: 30_000 } })
try {
  const accepted = await client.push({
    signal_id: `sig_${Date.now()}`,
    ts: new Date().toISOString(),
    token: 'So11111111111111111111111111111111111111112',
    severity: 'critical',
    confidence: 90,
    note: 'large transfer to a fresh wallet',
  })
  console.log(JSON.stringify(accepted))
} catch (err) {
  if (!(err instanceof PushError)) throw err
  // push_refused: fix the signal or the key; push_deadline_exceeded: the gateway was unreachable or busy.
  console.error(`${err.code}: ${err.message}`)
  process.exitCode = 1
}
