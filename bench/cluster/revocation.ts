import { createHash } from 'node:crypto'
import { apiRequest, sendSigned } from '../../harness/api-request.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { provisionSource } from '../../harness/provision-source.js'
import { creatorKeyFromSeed, signPush } from '../../harness/signed-push.js'
import { percentile } from '../receipts/stats.js'

/**
 * From an acknowledged key revocation on one gateway to its refusal on another: per trial,
 * a fresh source and key (accepted on `other` first, so its registry holds the key), the
 * revocation through `revoker`, and from its `200` pushes signed with that key sent to
 * `other` back to back until one is refused. The figure is the time from the `200` to the
 * refusal's answer, so it includes one push's round trip; a push accepted after the
 * `200` is counted apart (the revocation barrier promises none).
 */

export interface RevocationFigures {
  readonly trials: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  /** Pushes `other` accepted after the revocation's 200 (0 is the promise). */
  readonly acceptedAfterAck: number
  readonly refusal: string
}

const MANIFEST = { archetype: 'wallet-watcher', schema_version: '1.0', severity_levels: ['info', 'warning', 'critical'], max_rate: { rate: 1000, per: 'second', burst: 1000 }, coverage: { chains: ['solana'], wallet_set_size: 10 }, contact: 'bench@example.com' }
const TOKEN = 'So11111111111111111111111111111111111111112'

export async function revocationPhase(revoker: LaunchedGateway, other: LaunchedGateway, trials: number, tag: string): Promise<RevocationFigures> {
  const times: number[] = []
  let acceptedAfterAck = 0
  let refusal = ''
  for (let i = 0; i < trials; i++) {
    const seed = createHash('sha256').update(`sgw-revoke-${tag}-${i}`).digest()
    const key = creatorKeyFromSeed(seed)
    const { sourceId, keyId } = await provisionSource(revoker, {
      creatorId: `revoke_creator_${tag}_${i}`,
      agentId: `revoke_agent_${tag}_${i}`,
      slots: 1,
      manifest: MANIFEST,
      seed,
      testSignal: { signal_id: `revoke-test-${tag}-${i}`, ts: new Date().toISOString(), token: TOKEN, severity: 'info' },
    })
    let n = 0
    const push = () => sendSigned(other.url, signPush({ sourceId, keyId, key, payload: { signal_id: `rv-${tag}-${i}-${n++}`, source_id: sourceId, ts: new Date().toISOString(), token: TOKEN, severity: 'info', confidence: 50 } }))
    const before = await push()
    if (before.status !== 202) throw new Error(`revocation trial ${i}: the other gateway refused the key before its revocation: ${before.status} ${JSON.stringify(before.body)}`)
    const revoked = await apiRequest(revoker.url, 'POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/revoke`, { token: revoker.adminToken, body: {} })
    if (revoked.status !== 200) throw new Error(`revocation trial ${i}: ${revoked.status} ${JSON.stringify(revoked.body)}`)
    const acked = performance.now()
    for (;;) {
      const res = await push()
      if (res.status === 202) {
        acceptedAfterAck++
        if (performance.now() - acked > 10_000) throw new Error(`revocation trial ${i}: still accepted 10 s after the revocation`)
        continue
      }
      times.push(performance.now() - acked)
      refusal = `${res.status} ${(res.body as { error?: { code?: string } })?.error?.code ?? ''}`.trim()
      break
    }
  }
  return { trials, p50Ms: percentile(times, 50), p99Ms: percentile(times, 99), maxMs: Math.max(...times), acceptedAfterAck, refusal }
}
