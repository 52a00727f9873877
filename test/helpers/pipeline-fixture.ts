import { createHash, generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { composeEmbeddedIngest, openJournal, SignalIdHistory, type EmbeddedIngestOptions, type SignedRequest, type VerifyPool } from '../../pipeline/index.js'
import { openRegistry, registryBucket } from './registry-bucket.js'
import { MANIFEST, payload } from './api.js'

/**
 * The ingest pipeline with a real journal and registry, and a verifier stand-in whose
 * verdicts the test releases by hand: the only way to hold a request exactly between
 * verification and the next step. The real pool is tested in verify-pool.test.ts.
 */
export class GatedVerifier {
  readonly gates: Array<(valid: boolean) => void> = []
  verify(): Promise<boolean> {
    return new Promise((resolve) => this.gates.push(resolve))
  }
}

export async function pipelineSetup(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-pipeline-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  // As the service opens it: the pipeline's own index is the only dedup window.
  const log = await openJournal({ dir: join(dir, 'journal'), fsync: 'always', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const history = await SignalIdHistory.open({ dir: join(dir, 'signal-ids'), maxEntries: 1000, log, onWarning: () => undefined })
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store, 'admin')
  const agent = await registry.createAgent({ agent_id: 'a', creator_id: 'c', slots: 1 })
  const source = await registry.createSource({ agent, manifest: structuredClone(MANIFEST) as any, listing: { public_receipts: false } })
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const keyRecord = await registry.addKey(source.source_id, raw)
  await registry.markTested(source.source_id, keyRecord.key_id)
  await registry.promoteKey(source.source_id, keyRecord.key_id)
  const verifier = new GatedVerifier()
  const warnings: string[] = []
  // The pipeline as the gateway composes it, with the embedded state behind its ports
  // (`state`: rebuild, saves) and the ports themselves (`ports`) at hand for the tests.
  const makePipeline = (overrides: Partial<EmbeddedIngestOptions> = {}) => {
    const ingest = composeEmbeddedIngest({
      log,
      pool: verifier as unknown as VerifyPool,
      registry,
      now: Date.now,
      nonceWindowMs: 600_000,
      maxLiveNonces: 1000,
      maxDedupEntries: 1000,
      appendQueueLimit: 1000,
      dedupWindowMs: 1_800_000,
      history,
      flagAfterMinutes: 5,
      rateCeiling: { perSecond: 100_000, burst: 100_000 },
      onLogFailure: () => undefined,
      onWarning: (m) => warnings.push(m),
      ...overrides,
    })
    return Object.assign(ingest.pipeline, { state: ingest.state, ports: ingest.ports })
  }
  const pipeline = makePipeline()
  const request = (overrides: Partial<SignedRequest> = {}): SignedRequest => {
    const body = Buffer.from(JSON.stringify(payload(source.source_id)))
    return {
      requestId: 'req_1',
      receivedAtMs: Date.now(),
      method: 'POST',
      path: `/v1/byo/sources/${source.source_id}/signals`,
      source,
      verifyHolder: source.source_id,
      key: registry.key(source.source_id, keyRecord.key_id)!,
      timestampHeader: new Date().toISOString(),
      requestTimeMs: Date.now(),
      nonce: `n-${Math.random()}`,
      signature: Buffer.alloc(64),
      idempotencyKey: undefined,
      idempotencyKeyCount: 0,
      body,
      bodySha256: createHash('sha256').update(body).digest('hex'),
      json: { ok: true, value: JSON.parse(body.toString()) },
      nonceClaimed: false,
      ...overrides,
    }
  }
  return { dir, log, store, registry, source, keyRecord, verifier, pipeline, makePipeline, request, warnings }
}
