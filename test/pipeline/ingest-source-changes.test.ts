import { createHash, generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { IngestPipeline, openJournal, SignalIdHistory, type SignedRequest, type VerifyPool } from '../../pipeline/index.js'
import { Registry, type RegistryStore } from '../../registry/index.js'
import type { RegistrySnapshot } from '../../registry/records.js'
import { MANIFEST, payload } from '../helpers/api.js'

/**
 * A source changed while its requests are in flight: retired, or given a lower
 * max_rate. The verifier is a stand-in whose verdicts the test releases by hand, the
 * only way to hold a request exactly at verification (the real pool is tested in
 * verify-pool.test.ts); the journal and the registry are the real ones.
 */
class GatedVerifier {
  readonly gates: Array<(valid: boolean) => void> = []
  verify(): Promise<boolean> {
    return new Promise((resolve) => this.gates.push(resolve))
  }
}

class MemoryStore implements RegistryStore {
  saved: RegistrySnapshot | undefined
  async load() {
    return this.saved
  }
  async append(_change: unknown, current: () => RegistrySnapshot) {
    this.saved = structuredClone(current())
  }
}

async function setup(t: { teardown(fn: () => unknown): void }) {
  const dir = await mkdtemp(join(tmpdir(), 'sgw-pipeline-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const log = await openJournal({ dir: join(dir, 'journal'), fsync: 'always', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const history = await SignalIdHistory.open({ dir: join(dir, 'signal-ids'), maxEntries: 1000, log, onWarning: () => undefined })
  const registry = await Registry.open(new MemoryStore(), 'admin')
  const agent = await registry.createAgent({ agent_id: 'a', creator_id: 'c', slots: 1 })
  const source = await registry.createSource({ agent, manifest: structuredClone(MANIFEST) as any, listing: { public_receipts: false } })
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const keyRecord = await registry.addKey(source.source_id, raw)
  await registry.markTested(source.source_id, keyRecord.key_id)
  await registry.promoteKey(source.source_id, keyRecord.key_id)
  const verifier = new GatedVerifier()
  const pipeline = new IngestPipeline({
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
    onWarning: () => undefined,
  })
  // As the edge builds it: the source record the registry holds, which a change alters in place.
  const request = (): SignedRequest => {
    const body = Buffer.from(JSON.stringify(payload(source.source_id)))
    return {
      requestId: 'req_1',
      receivedAtMs: Date.now(),
      method: 'POST',
      path: `/v1/byo/sources/${source.source_id}/signals`,
      source: registry.source(source.source_id)!,
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
    }
  }
  return { log, registry, source, verifier, pipeline, request }
}

const settle = () => new Promise((r) => setImmediate(r))
const outcome = (p: Promise<unknown>) => p.then(() => 'accepted', (err: { code: string; message: string }) => `${err.code}: ${err.message}`)

t.test('a source retired while its request waits for verification gets the refusal of an unknown source, and nothing is logged', async (t) => {
  const { registry, source, verifier, pipeline, request, log } = await setup(t)
  const req = request()
  const pending = outcome(pipeline.process(req))
  await settle()
  await registry.retireSource(source.source_id)
  verifier.gates[0]!(true)
  t.equal(await pending, 'unknown_key: no such key for this source', "the edge's answer for a source that does not exist")
  t.equal(req.nonceClaimed, false, 'refused right after verification, before the nonce is spent')
  t.equal((await log.info()).lastSeq, 0)
})

t.test('a max_rate lowered while requests wait for verification applies to them', async (t) => {
  const { registry, source, verifier, pipeline, request, log } = await setup(t)
  const answers = [0, 1, 2].map(() => outcome(pipeline.process(request())))
  await settle()
  await registry.updateSource(source.source_id, { manifest: { ...structuredClone(MANIFEST), max_rate: { rate: 1, per: 'minute', burst: 1 } } as any })
  for (const gate of verifier.gates) gate(true)
  t.same(await Promise.all(answers), ['accepted', 'rate_limited: source exceeded its max_rate of 1 per minute', 'rate_limited: source exceeded its max_rate of 1 per minute'])
  t.equal((await log.info()).lastSeq, 1)
})
