import t from 'tap'
import { MANIFEST } from '../helpers/api.js'
import { pipelineSetup } from '../helpers/pipeline-fixture.js'

/**
 * A source changed while its requests are in flight: retired, or given a lower
 * max_rate. The verifier is a stand-in whose verdicts the test releases by hand, the
 * only way to hold a request exactly at verification (the real pool is tested in
 * verify-pool.test.ts); the journal and the registry are the real ones.
 */
async function setup(t: { teardown(fn: () => unknown): void }) {
  const fixture = await pipelineSetup(t)
  // As the edge builds it: the source record the registry holds, which a change alters in place.
  const request = () => fixture.request({ source: fixture.registry.source(fixture.source.source_id)! })
  return { ...fixture, request }
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
