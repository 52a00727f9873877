import { createHash, generateKeyPairSync } from 'node:crypto'
import { readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { EmbeddedIngestOptions, SignedRequest, VerifyPool } from '../../pipeline/index.js'
import { payload } from '../helpers/api.js'
import { GatedVerifier, pipelineSetup } from '../helpers/pipeline-fixture.js'

// The pipeline with a real journal and registry and a verifier whose verdicts the tests release by hand.
const setup = pipelineSetup

const settle = () => new Promise((r) => setImmediate(r))

t.test('a key revoked while its request waits for verification gets 401 revoked_key, and nothing is logged', async (t) => {
  const { registry, source, keyRecord, verifier, pipeline, request, log } = await setup(t)
  const req = request()
  const pending = pipeline.process(req)
  await settle()
  await registry.revokeKey(source.source_id, keyRecord.key_id)
  verifier.gates[0]!(true)
  await t.rejects(pending, { code: 'revoked_key' })
  t.equal(req.nonceClaimed, false, 'refused right after verification, before the nonce is spent')
  t.equal((await log.info()).lastSeq, 0)
})

t.test('a request whose timestamp went stale while it waited for a worker is refused before its nonce is claimed', async (t) => {
  const { verifier, pipeline, request } = await setup(t)
  const old = Date.now() - 300_500
  const req = request({ requestTimeMs: old, timestampHeader: new Date(old).toISOString() })
  const pending = pipeline.process(req)
  await settle()
  verifier.gates[0]!(true)
  await t.rejects(pending, { code: 'stale_timestamp' })
  t.equal(req.nonceClaimed, false)
})

t.test('an accepted signal is in the log with the raw body, signature and signed headers', async (t) => {
  const { verifier, pipeline, request, log } = await setup(t)
  const req = request()
  const pending = pipeline.process(req)
  await settle()
  verifier.gates[0]!(true)
  const accepted = await pending
  t.equal(accepted.status, 'accepted')
  const [record] = await log.read({ fromSeq: 1 }, 1)
  const stored = JSON.parse(Buffer.from(record!.data).toString())
  t.equal(stored.body, req.body.toString())
  t.equal(stored.nonce, req.nonce)
  t.equal(stored.request_timestamp, req.timestampHeader)
  t.equal(stored.signature, Buffer.from(req.signature).toString('base64'))
  t.equal(record!.dedupId, `${req.source.source_id}/${accepted.signal_id}`)
})

t.test('a pending key signs test signals: the record says test true, a normal accept says false', async (t) => {
  const { verifier, pipeline, request, log, registry, source } = await setup(t)
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const pendingKey = await registry.addKey(source.source_id, raw)
  const testing = pipeline.process(request({ key: registry.key(source.source_id, pendingKey.key_id)! }))
  const normal = pipeline.process(request())
  await settle()
  verifier.gates[0]!(true)
  verifier.gates[1]!(true)
  t.equal((await testing).test, true)
  t.equal((await normal).test, undefined)
  const records = await log.read({ fromSeq: 1 }, 10)
  t.same(records.map((r) => JSON.parse(Buffer.from(r.data).toString()).test).sort(), [false, true])
})

t.test('revocation is forward-only: signals accepted before it stay in the log, the next is refused', async (t) => {
  const { verifier, pipeline, request, log, registry, source, keyRecord } = await setup(t)
  const before = pipeline.process(request())
  await settle()
  verifier.gates[0]!(true)
  const accepted = await before
  await registry.revokeKey(source.source_id, keyRecord.key_id)
  const after = pipeline.process(request())
  await settle()
  verifier.gates[1]!(true)
  await t.rejects(after, { code: 'revoked_key' })
  const records = await log.read({ fromSeq: 1 }, 10)
  t.equal(records.length, 1)
  t.equal(JSON.parse(Buffer.from(records[0]!.data).toString()).signal_id, accepted.signal_id)
})

t.test('a rate ceiling lowered after a source registered caps it: the source declared 1000/s, the ceiling allows 1/s with a burst of 2', async (t) => {
  const { verifier, makePipeline, request, log } = await setup(t)
  const pipeline = makePipeline({ rateCeiling: { perSecond: 1, burst: 2 } })
  const answers = [0, 1, 2].map(() => pipeline.process(request()).then(() => 'accepted', (err: { code: string; message: string }) => `${err.code}: ${err.message}`))
  await settle()
  for (const gate of verifier.gates) gate(true)
  t.same(await Promise.all(answers), ['accepted', 'accepted', 'rate_limited: source exceeded its max_rate of 1 per second'])
  t.equal((await log.info()).lastSeq, 2)
})

t.test('a signal the dedup index has no room for is refused before the append: 429 at the source share, and nothing is logged', async (t) => {
  const { verifier, makePipeline, request, log } = await setup(t)
  // A quarter of 8: room for two signals of this source.
  const pipeline = makePipeline({ maxDedupEntries: 8 })
  const answers = [0, 1, 2].map(() => pipeline.process(request()).then(() => 'accepted', (err: { code: string; message: string; retryAfter: number }) => `${err.code} ${err.retryAfter}: ${err.message}`))
  await settle()
  for (const gate of verifier.gates) gate(true)
  t.same(await Promise.all(answers), ['accepted', 'accepted', 'rate_limited 60: too many signals of this source in the dedup window'])
  t.equal((await log.info()).lastSeq, 2)
  t.equal(pipeline.dedupEntries, 2)
})

t.test('a signal refused for lack of dedup room gives its rate token back', async (t) => {
  const { verifier, makePipeline, request } = await setup(t)
  // Room for two signals of this source, three tokens that refill once a second, and
  // remembered signals expire after 50 ms, so room comes back long before a token does.
  const pipeline = makePipeline({ maxDedupEntries: 8, dedupWindowMs: 50, rateCeiling: { perSecond: 1, burst: 3 } })
  const send = () => {
    const answer = pipeline.process(request()).then(() => 'accepted', (err: { code: string }) => err.code)
    return settle().then(() => {
      for (const gate of verifier.gates.splice(0)) gate(true)
      return answer
    })
  }
  t.same(await Promise.all([send(), send(), send()]), ['accepted', 'accepted', 'rate_limited'], 'the third finds no room')
  await new Promise((r) => setTimeout(r, 80))
  t.equal(await send(), 'accepted', 'the third token was given back: the fourth is within the burst')
  t.equal(await send(), 'rate_limited', 'and the bucket is empty now')
})

t.test('a body that is JSON but not an object is invalid_body, not invalid_signal_id', async (t) => {
  const { verifier, pipeline, request } = await setup(t)
  for (const value of [[], 'str', 42, null]) {
    const pending = pipeline.process(request({ json: { ok: true, value } }))
    await settle()
    verifier.gates.shift()!(true)
    await t.rejects(pending, { code: 'invalid_body' }, JSON.stringify(value))
  }
})

t.test('after a restart the rebuilt state still deduplicates and still refuses the nonce', async (t) => {
  const { verifier, pipeline, makePipeline, request } = await setup(t)
  const req = request()
  const first = pipeline.process(req)
  await settle()
  verifier.gates.shift()!(true)
  const accepted = await first
  const rebuilt = makePipeline()

  t.equal((await rebuilt.state.rebuild()).restored, 1)
  const replay = rebuilt.process({ ...req, nonceClaimed: false })
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(replay, { code: 'replayed_nonce' })
  const retry = rebuilt.process({ ...req, nonce: 'fresh-nonce', nonceClaimed: false })
  await settle()
  verifier.gates.shift()!(true)
  const again = await retry
  t.equal(again.deduplicated, true)
  t.equal(again.received_at, accepted.received_at)
})

t.test('past the dedup window a reused signal_id is refused with 400 invalid_signal_id, and the log keeps one record', async (t) => {
  const { verifier, pipeline, makePipeline, request, source, log } = await setup(t)
  const req = request()
  const first = pipeline.process(req)
  await settle()
  verifier.gates.shift()!(true)
  await first
  // A pipeline whose dedup window holds nothing: what remains once the window has passed.
  const later = makePipeline()
  const sameBody = later.process({ ...req, nonce: 'later-nonce-1', nonceClaimed: false })
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(sameBody, { code: 'invalid_signal_id', status: 400 })
  const signalId = (req.json as { value: { signal_id: string } }).value.signal_id
  const body = Buffer.from(JSON.stringify(payload(source.source_id, { signal_id: signalId, severity: 'critical' })))
  const otherBody = later.process(
    request({ nonce: 'later-nonce-2', body, bodySha256: createHash('sha256').update(body).digest('hex'), json: { ok: true, value: JSON.parse(body.toString()) } }),
  )
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(otherBody, { code: 'invalid_signal_id' })
  t.equal((await log.info()).lastSeq, 1, 'no second record under the same signal id')
})

t.test('a log that refuses the append gives 503 not_ready, reports the failure, and remembers nothing', async (t) => {
  const { verifier, request, makePipeline, log } = await setup(t)
  const { LogError } = await import('../../pipeline/index.js')
  const failures: Error[] = []
  // A disk that fails cannot be produced here: this log stands in for one whose fsync failed.
  const failing = Object.create(log, {
    append: { value: async () => Promise.reject(new LogError('log_io', 'fdatasync failed: EIO')) },
  })
  const pipeline = makePipeline({ log: failing, onLogFailure: (err) => failures.push(err) })

  const req = request()
  const pending = pipeline.process(req)
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(pending, { code: 'not_ready', status: 503, retryAfter: 1 })
  t.equal(failures.length, 1)
  t.equal((failures[0] as { code?: string }).code, 'log_io')
  const retry = pipeline.process({ ...req, nonce: 'another-nonce', nonceClaimed: false })
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(retry, { code: 'not_ready' }, 'the failed signal was not remembered as accepted')
})

t.test('after a restart an Idempotency-Key of an accepted signal still conflicts under another signal_id', async (t) => {
  const { verifier, pipeline, makePipeline, request, source } = await setup(t)
  const first = pipeline.process(request({ idempotencyKey: 'idem_restart_1' }))
  await settle()
  verifier.gates.shift()!(true)
  await first
  const rebuilt = makePipeline()
  t.equal((await rebuilt.state.rebuild()).restored, 1)
  const body = Buffer.from(JSON.stringify(payload(source.source_id)))
  const other = rebuilt.process(
    request({ idempotencyKey: 'idem_restart_1', body, bodySha256: createHash('sha256').update(body).digest('hex'), json: { ok: true, value: JSON.parse(body.toString()) } }),
  )
  await settle()
  verifier.gates.shift()!(true)
  await t.rejects(other, { code: 'idempotency_conflict' })
})

/**
 * Sends a request and then its duplicate, holds the first one's append until both are
 * past verification, revokes the key, and lets the append fail or succeed. The real
 * journal behind a gate: the only way to keep the duplicate waiting during a revoke.
 */
async function revokeWhileDuplicateWaits(t: Parameters<typeof setup>[0], outcome: 'fail' | 'succeed') {
  const { verifier, request, makePipeline, log, registry, source, keyRecord } = await setup(t)
  const { LogError } = await import('../../pipeline/index.js')
  let release: (() => void) | undefined
  const gated = Object.create(log, {
    append: {
      value: (id: string, data: Uint8Array) => {
        if (release !== undefined) return log.append(id, data)
        return new Promise<void>((resolve, reject) => {
          release = outcome === 'succeed' ? resolve : () => reject(new LogError('log_io', 'write failed: EIO'))
        }).then(() => log.append(id, data))
      },
    },
  })
  const pipeline = makePipeline({ log: gated })
  const first = request()
  const a = pipeline.process(first)
  await settle()
  verifier.gates.shift()!(true)
  await settle()
  if (release === undefined) throw new Error('the first request is not appending')
  const b = pipeline.process({ ...first, nonce: 'second-nonce', nonceClaimed: false })
  await settle()
  verifier.gates.shift()!(true)
  await settle()
  await registry.revokeKey(source.source_id, keyRecord.key_id)
  release()
  return { a, b, log }
}

t.test('a key revoked while a request waits for an in-flight duplicate is refused at the last look before the append', async (t) => {
  const { a, b, log } = await revokeWhileDuplicateWaits(t, 'fail')
  await t.rejects(a, { code: 'not_ready' })
  await t.rejects(b, { code: 'revoked_key' }, 'the duplicate that waited sees the revocation')
  t.equal((await log.info()).lastSeq, 0, 'nothing was logged')
})

t.test('a key revoked while its request waits for a duplicate that then succeeds gets revoked_key, not the replay 202', async (t) => {
  const { a, b, log } = await revokeWhileDuplicateWaits(t, 'succeed')
  t.notOk((await a).deduplicated, 'the first was past its last look and is accepted')
  await t.rejects(b, { code: 'revoked_key' }, 'the duplicate that waited sees the revocation')
  t.equal((await log.info()).lastSeq, 1, 'one record')
})

t.test("a pending key's deduplicated 202 for a signal another key sent marks it tested", async (t) => {
  const { verifier, pipeline, request, registry, source } = await setup(t)
  const first = request()
  const a = pipeline.process(first)
  await settle()
  verifier.gates.shift()!(true)
  await a
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const next = await registry.addKey(source.source_id, raw)
  const b = pipeline.process({ ...first, nonce: 'rotation-nonce', nonceClaimed: false, key: registry.key(source.source_id, next.key_id)! })
  await settle()
  verifier.gates.shift()!(true)
  const replayed = await b
  t.equal(replayed.deduplicated, true)
  t.not(registry.key(source.source_id, next.key_id)!.record.tested_at, null, 'the new key may now be promoted')
  await registry.promoteKey(source.source_id, next.key_id)
  t.equal(registry.key(source.source_id, next.key_id)!.record.state, 'active')
})

t.test("a pending key's deduplicated 202 that waits for its test mark holds a revocation's acknowledgement until it is answered", async (t) => {
  const { verifier, pipeline, request, registry, source, store } = await setup(t)
  const first = request()
  await passed(verifier, pipeline.process(first))
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const next = await registry.addKey(source.source_id, raw)
  let open!: () => void
  store.hold = new Promise<void>((resolve) => (open = resolve))
  const events: string[] = []
  const replay = passed(verifier, pipeline.process({ ...first, nonce: 'pending-nonce', nonceClaimed: false, key: registry.key(source.source_id, next.key_id)! }))
  const answered = replay.then((a) => events.push(`202 deduplicated=${String(a.deduplicated)}`))
  await new Promise((r) => setTimeout(r, 20))
  const settled = pipeline.ports.revocations.settled().then(() => events.push('settled'))
  await new Promise((r) => setTimeout(r, 50))
  t.same(events, [], 'the barrier waits while the test mark is being written')
  open()
  await Promise.all([answered, settled])
  t.same(events, ['202 deduplicated=true', 'settled'])
})

/** Runs one request through the gated verifier, which passes it. */
async function passed<T>(verifier: GatedVerifier, answer: Promise<T>): Promise<T> {
  await settle()
  verifier.gates.shift()!(true)
  return answer
}

t.test('a signal whose append fails gives its rate token back', async (t) => {
  const { verifier, makePipeline, request, log } = await setup(t)
  const { LogError } = await import('../../pipeline/index.js')
  let failures = 2
  const flaky = Object.create(log, {
    append: { value: (id: string, data: Uint8Array) => (failures-- > 0 ? Promise.reject(new LogError('log_closed', 'the log is closing')) : log.append(id, data)) },
  })
  const pipeline = makePipeline({ log: flaky, rateCeiling: { perSecond: 1, burst: 2 } })
  const code = (p: Promise<unknown>) => p.then(() => 'accepted', (err: { code: string }) => err.code)
  t.equal(await code(passed(verifier, pipeline.process(request()))), 'not_ready')
  t.equal(await code(passed(verifier, pipeline.process(request()))), 'not_ready')
  t.equal(await code(passed(verifier, pipeline.process(request()))), 'accepted', 'the two failed appends cost no token')
  t.equal(await code(passed(verifier, pipeline.process(request()))), 'accepted')
  t.equal(await code(passed(verifier, pipeline.process(request()))), 'rate_limited', 'the burst of two is spent by the two stored signals')
})

t.test('a revocation made while a request is being appended is acknowledged only once that request has its answer', async (t) => {
  const { verifier, makePipeline, request, log, registry, source, keyRecord } = await setup(t)
  let release: (() => void) | undefined
  const gated = Object.create(log, {
    append: { value: (id: string, data: Uint8Array) => new Promise<void>((resolve) => (release = resolve)).then(() => log.append(id, data)) },
  })
  const pipeline = makePipeline({ log: gated })
  const events: string[] = []
  const inFlight = passed(verifier, pipeline.process(request())).then((a) => events.push(`202 test=${String(a.test === true)}`))
  await settle()
  t.ok(release, 'the request is past its last key check and appending')
  const revoked = registry.revokeKey(source.source_id, keyRecord.key_id).then(() => pipeline.ports.revocations.settled()).then(() => events.push('revoke acknowledged'))
  await new Promise((r) => setTimeout(r, 50))
  t.same(events, [], 'the revocation waits for the request')
  const after = passed(verifier, pipeline.process(request()))
  await t.rejects(after, { code: 'revoked_key' }, 'a request arriving meanwhile is refused')
  release!()
  await Promise.all([inFlight, revoked])
  t.same(events, ['202 test=false', 'revoke acknowledged'])
  t.equal((await log.info()).lastSeq, 1)
})

t.test('a promotion not yet on disk changes nothing for ingest: the key signs tests until it is, and a failed promotion leaves no delivered signal', async (t) => {
  const { verifier, pipeline, request, store, registry, source } = await setup(t)
  const raw = generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32)
  const next = await registry.addKey(source.source_id, raw)
  await registry.markTested(source.source_id, next.key_id)
  const key = registry.key(source.source_id, next.key_id)!
  let fail!: (err: Error) => void
  store.hold = new Promise<void>((_, reject) => (fail = reject))
  const promotion = registry.promoteKey(source.source_id, next.key_id)
  await settle()
  t.equal(key.record.state, 'pending', 'not promoted while the write is under way: the index takes it once stored')
  const during = await passed(verifier, pipeline.process(request({ key })))
  t.equal(during.test, true, 'a signal signed meanwhile is a test signal')
  fail(Object.assign(new Error('EIO: i/o error'), { code: 'EIO' }))
  await t.rejects(promotion, { code: 'EIO' })
  t.equal(key.record.state, 'pending', 'still pending')
  await registry.promoteKey(source.source_id, next.key_id)
  const after = await passed(verifier, pipeline.process(request({ key })))
  t.equal(after.test, undefined, 'once the promotion is recorded the key signs deliverable signals')
})

t.test('a source past its share of the nonce store is refused at the rate step: a retry of an accepted signal still gets its 202, a bad body its 400', async (t) => {
  const { verifier, makePipeline, request } = await setup(t)
  // A quarter of 8: two live nonces for this source.
  const pipeline = makePipeline({ maxLiveNonces: 8 })
  const first = request()
  await passed(verifier, pipeline.process(first))
  await passed(verifier, pipeline.process(request()))
  const retry = await passed(verifier, pipeline.process({ ...first, nonce: 'n-retry', nonceClaimed: false }))
  t.equal(retry.deduplicated, true, 'the retry is answered by dedup')
  const bad = request()
  const badBody = Buffer.from(JSON.stringify({ ...JSON.parse(bad.body.toString()), severity: 'nope' }))
  await t.rejects(passed(verifier, pipeline.process({ ...bad, body: badBody, json: { ok: true, value: JSON.parse(badBody.toString()) }, bodySha256: createHash('sha256').update(badBody).digest('hex') })), { code: 'invalid_severity' })
  await t.rejects(passed(verifier, pipeline.process(request())), { code: 'rate_limited', retryAfter: 60 }, 'a new signal is refused')
})

t.test('a verify batch lost with its worker answers 503 not_ready, so the client retries, and is reported', async (t) => {
  const { makePipeline, request, log } = await setup(t)
  const warnings: string[] = []
  const dying = { verify: () => Promise.reject(new Error('worker exited with code: 1')) }
  const pipeline = makePipeline({ pool: dying as unknown as VerifyPool, onWarning: (m) => warnings.push(m) })
  await t.rejects(pipeline.process(request()), { code: 'not_ready', status: 503, retryAfter: 1 })
  t.same(warnings, ['a verify batch failed'])
  t.equal((await log.info()).lastSeq, 0)
})

t.test('verified requests waiting for a stalled append fill their limit, and the pipeline then says no room until they are through', async (t) => {
  const { verifier, makePipeline, request, log } = await setup(t)
  const releases: Array<() => void> = []
  const stalled = Object.create(log, {
    append: { value: (id: string, data: Uint8Array) => new Promise<void>((resolve) => releases.push(resolve)).then(() => log.append(id, data)) },
  })
  const pipeline = makePipeline({ log: stalled, appendQueueLimit: 2 })
  const first = passed(verifier, pipeline.process(request()))
  t.ok(pipeline.hasRoom(), 'room while one waits')
  await settle()
  const second = passed(verifier, pipeline.process(request()))
  await settle()
  t.equal(pipeline.appending, 2)
  t.notOk(pipeline.hasRoom(), 'no room with two waiting')
  for (const release of releases) release()
  await Promise.all([first, second])
  t.equal(pipeline.appending, 0)
  t.ok(pipeline.hasRoom(), 'room again once they are through')
})

/** A request whose body has `severity` changed: it claims its nonce, then fails validation. */
function withSeverity(req: SignedRequest, severity: string): SignedRequest {
  const body = Buffer.from(JSON.stringify({ ...JSON.parse(req.body.toString()), severity }))
  return { ...req, body, json: { ok: true, value: JSON.parse(body.toString()) }, bodySha256: createHash('sha256').update(body).digest('hex') }
}

/** A pipeline that accepted A (with an Idempotency-Key) and refused R after claiming its nonce, then saved its state at `mark`. */
async function savedState(t: Test) {
  const ctx = await setup(t)
  const stateFile = join(ctx.dir, 'ingest-state.bin')
  const pipeline = ctx.makePipeline({ stateFile })
  const a = ctx.request({ idempotencyKey: 'idem_saved' })
  const accepted = await passed(ctx.verifier, pipeline.process(a))
  const refused = withSeverity(ctx.request(), 'nope')
  await t.rejects(passed(ctx.verifier, pipeline.process(refused)), { code: 'invalid_severity' })
  const mark = await pipeline.state.logMark()
  t.same(mark && { seq: mark.seq, dedupId: mark.dedupId }, { seq: 1, dedupId: `${ctx.source.source_id}/${(a.json as { value: { signal_id: string } }).value.signal_id}` })
  return { ...ctx, stateFile, pipeline, a, accepted, refused, mark: mark! }
}

t.test('after a clean shutdown the next start takes the saved state over and reads from the log only what came after it', async (t) => {
  const { verifier, makePipeline, request, stateFile, pipeline, a, accepted, refused, mark } = await savedState(t)
  t.ok(((await pipeline.state.saveState(mark))?.bytes ?? 0) > 0)
  // A record the log took after the mark (possible only if the state was saved and the process then went on).
  const b = request()
  await passed(verifier, pipeline.process(b))

  const next = makePipeline({ stateFile })
  const report = await next.state.rebuild()
  t.ok(report.snapshot, 'the state came from the snapshot')
  t.equal(report.restored, 1, 'only the record after the mark was read from the log')
  await t.rejects(passed(verifier, next.process({ ...refused, nonceClaimed: false })), { code: 'replayed_nonce' }, 'the nonce of a refused request, which the log never saw, is still spent')
  const retry = await passed(verifier, next.process({ ...a, nonce: 'n-retry-a', nonceClaimed: false }))
  t.equal(retry.deduplicated, true)
  t.equal(retry.received_at, accepted.received_at)
  t.equal((await passed(verifier, next.process({ ...b, nonce: 'n-retry-b', nonceClaimed: false }))).deduplicated, true, 'the record after the mark is remembered too')
  await t.rejects(passed(verifier, next.process(request({ idempotencyKey: 'idem_saved' }))), { code: 'idempotency_conflict' })

  // The file stays: a start after a crash of this one takes it over again and reads the log after its mark, now three records.
  const c = request()
  await passed(verifier, next.process(c))
  const third = makePipeline({ stateFile })
  const again = await third.state.rebuild()
  t.ok(again.snapshot, 'the same saved state is taken over again')
  t.equal(again.restored, 2, 'and the records after its mark read from the log')
  for (const [r, nonce] of [[a, 'n-3a'], [b, 'n-3b'], [c, 'n-3c']] as const) {
    t.equal((await passed(verifier, third.process({ ...r, nonce, nonceClaimed: false }))).deduplicated, true, `${nonce}: deduplicated`)
  }
})

t.test('a save while running waits for the appends the log already counts, so its state holds every record up to its mark', async (t) => {
  const { log, verifier, makePipeline, request, dir } = await setup(t)
  const stateFile = join(dir, 'ingest-state.bin')
  // An append that is in the log (its seq counted) but not yet acknowledged, as while its fsync runs.
  let open!: () => void
  const gate = new Promise<void>((resolve) => (open = resolve))
  const held: typeof log.append = async (id, data) => {
    const appended = await log.append(id, data)
    await gate
    return appended
  }
  const slowLog = new Proxy(log, { get: (target, name: keyof typeof log) => (name === 'append' ? held : target[name].bind(target)) })
  const pipeline = makePipeline({ log: slowLog, stateFile })
  const a = request()
  const accepting = passed(verifier, pipeline.process(a))
  while ((await log.info()).lastSeq === 0) await new Promise((r) => setImmediate(r))
  const saving = pipeline.state.saveState()
  const first = await Promise.race([saving.then(() => 'saved'), new Promise((r) => setTimeout(() => r('waiting'), 200))])
  t.equal(first, 'waiting', 'the save waits for the append the log already counts')
  open()
  const accepted = await accepting
  const saved = await saving
  t.equal(saved?.mark?.seq, 1, 'the save covers the record that was being appended')
  t.equal(saved?.dedupEntries, 1, 'and holds its dedup entry')
  t.equal(await pipeline.state.saveState(), undefined, 'a second save with nothing new is skipped')

  const next = makePipeline({ stateFile })
  const report = await next.state.rebuild()
  t.equal(report.restored, 0, 'nothing after the mark')
  const retry = await passed(verifier, next.process({ ...a, nonce: 'n-retry', nonceClaimed: false }))
  t.equal(retry.deduplicated, true, 'the retry is deduplicated from the saved state alone')
  t.equal(retry.received_at, accepted.received_at)
  t.equal(await next.state.saveState(), undefined, 'a start that took a state over saves again only once the log has more')
})

t.test('a saved state is not used when the log does not hold its last record, when the windows changed, or when it is damaged: the log rebuilds it, with a warning', async (t) => {
  const cases: Array<[string, (ctx: Awaited<ReturnType<typeof savedState>>) => Promise<Partial<EmbeddedIngestOptions>>]> = [
    ['the log does not hold its last record', async (ctx) => (await ctx.pipeline.state.saveState({ ...ctx.mark, dedupId: 'src_other/sig_other' }), {})],
    ['written under other windows', async (ctx) => (await ctx.pipeline.state.saveState(ctx.mark), { dedupWindowMs: 60_000 })],
    [
      'unreadable',
      async (ctx) => {
        await ctx.pipeline.state.saveState(ctx.mark)
        const bytes = await readFile(ctx.stateFile)
        bytes[bytes.length >> 1]! ^= 0xff
        await writeFile(ctx.stateFile, bytes)
        return {}
      },
    ],
  ]
  for (const [why, spoil] of cases) {
    await t.test(why, async (t) => {
      const ctx = await savedState(t)
      const next = ctx.makePipeline({ stateFile: ctx.stateFile, ...(await spoil(ctx)) })
      const report = await next.state.rebuild()
      t.equal(report.snapshot, undefined)
      t.equal(report.restored, 1, 'the accepted signal was read back from the log')
      t.ok(ctx.warnings.some((w) => w.includes('snapshot not used') && w.includes(why)), ctx.warnings.join('; '))
      await t.rejects(stat(ctx.stateFile), { code: 'ENOENT' }, 'the unusable file is gone')
      await t.rejects(passed(ctx.verifier, next.process({ ...ctx.refused, nonceClaimed: false })), { code: 'invalid_severity' }, 'the refused nonce was only in the unused snapshot')
      t.equal((await passed(ctx.verifier, next.process({ ...ctx.a, nonce: 'n-retry', nonceClaimed: false }))).deduplicated, true, 'the log still deduplicates')
    })
  }
})

t.test('a rebuild cut short keeps the saved state, so the next start still takes it over', async (t) => {
  const { log, makePipeline, stateFile, pipeline, mark } = await savedState(t)
  await pipeline.state.saveState(mark)
  // A start stopped while it read the log after the mark (a SIGTERM during the rebuild).
  const read: typeof log.read = (start, max) => ('fromSeq' in start && start.fromSeq > mark.seq ? Promise.reject(new Error('stopped')) : log.read(start, max))
  const stopped = new Proxy(log, { get: (target, name: keyof typeof log) => (name === 'read' ? read : target[name].bind(target)) })
  await t.rejects(makePipeline({ log: stopped, stateFile }).state.rebuild(), { message: 'stopped' })
  t.ok((await stat(stateFile)).size > 0, 'the file is still there')
  const report = await makePipeline({ stateFile }).state.rebuild()
  t.ok(report.snapshot, 'and the next start uses it')
})

t.test('a signal appended while the state was being saved, so both in the saved state and after its mark, is remembered once', async (t) => {
  const { verifier, makePipeline, request, stateFile, pipeline, mark } = await savedState(t)
  await passed(verifier, pipeline.process(request({ idempotencyKey: 'idem_late' })))
  await pipeline.state.saveState(mark)
  const next = makePipeline({ stateFile })
  const report = await next.state.rebuild()
  t.equal(report.restored, 1, 'read again from the log')
  const fromLog = makePipeline()
  await fromLog.state.rebuild()
  t.equal(next.dedupEntries, fromLog.dedupEntries, 'as many entries as a rebuild from the log alone')
  t.equal(next.dedupEntries, 4, 'two signals, each with its own Idempotency-Key')
})

t.test('after the log refused an append, whose record it may hold, no state is saved while running: it could claim a record never remembered', async (t) => {
  const { log, verifier, makePipeline, request, dir } = await setup(t)
  const { LogError } = await import('../../pipeline/index.js')
  const stateFile = join(dir, 'ingest-state.bin')
  let fail = false
  // As when a segment roll fails after the first group of a batch was written and counted.
  const append: typeof log.append = async (id, data) => {
    const appended = await log.append(id, data)
    if (fail) throw new LogError('log_io', 'rolling to a new segment: EIO')
    return appended
  }
  const failing = new Proxy(log, { get: (target, name: keyof typeof log) => (name === 'append' ? append : target[name].bind(target)) })
  const pipeline = makePipeline({ log: failing, stateFile })
  await passed(verifier, pipeline.process(request()))
  t.equal((await pipeline.state.saveState())?.mark?.seq, 1, 'a save before the failure covers the log')
  fail = true
  await t.rejects(passed(verifier, pipeline.process(request())), { code: 'not_ready' })
  t.equal((await log.info()).lastSeq, 2, 'the refused append is in the log')
  await t.rejects(pipeline.state.saveState(), /refused an append/)
  const next = makePipeline({ stateFile })
  t.equal((await next.state.rebuild()).restored, 1, 'the next start reads the refused record back from the log, after the last good save')
})

t.test('a save while running has the log synced before the file is put in place: signals copied in past the mark must outlive a power cut with it', async (t) => {
  const { log, verifier, makePipeline, request, dir } = await setup(t)
  const stateFile = join(dir, 'ingest-state.bin')
  const syncs: boolean[] = []
  const sync = async () => {
    syncs.push(await stat(stateFile).then(() => true, () => false))
    return log.sync()
  }
  const watched = new Proxy(log, { get: (target, name: keyof typeof log) => (name === 'sync' ? sync : target[name].bind(target)) })
  const pipeline = makePipeline({ log: watched, stateFile })
  await passed(verifier, pipeline.process(request()))
  await pipeline.state.saveState()
  t.same(syncs, [false], 'synced once, before the file existed')
  t.ok((await stat(stateFile)).size > 0)
})

t.test('a temporary state file left by a save cut short is removed at the next start', async (t) => {
  const { makePipeline, dir } = await setup(t)
  const stateFile = join(dir, 'ingest-state.bin')
  await writeFile(`${stateFile}.tmp`, Buffer.alloc(4096))
  await makePipeline({ stateFile }).state.rebuild()
  await t.rejects(stat(`${stateFile}.tmp`), { code: 'ENOENT' })
})

t.test('over-rate going on for OVER_RATE_FLAG_MINUTES flags the source for review; the same refusals within seconds do not', async (t) => {
  const { registry, source, verifier, makePipeline, request } = await setup(t)
  const start = Date.now()
  let clock = start
  // The ceiling caps the source at 1 signal/s with a burst of 1: of two requests at one instant, the second is refused.
  const pipeline = makePipeline({ now: () => clock, flagAfterMinutes: 1, rateCeiling: { perSecond: 1, burst: 1 } })
  const flaggedAfter = async (offsetMs: number) => {
    clock = start + offsetMs
    const codes = []
    for (let i = 0; i < 2; i++) codes.push(await passed(verifier, pipeline.process(request())).then(() => 'accepted', (err: { code: string }) => err.code))
    t.same(codes, ['accepted', 'rate_limited'], `at ${offsetMs / 1000} s`)
    await settle()
    // Flagging is written to the registry's bucket without holding up the 429: wait for the write.
    await registry.settle()
    return registry.source(source.source_id)?.flagged_for_review_at !== null
  }
  t.equal(await flaggedAfter(0), false)
  t.equal(await flaggedAfter(2_000), false, 'two seconds of over-rate are not sustained')
  t.equal(await flaggedAfter(40_000), false)
  t.equal(await flaggedAfter(59_000), false)
  t.equal(await flaggedAfter(61_000), true, 'a minute of refusals, never a minute apart, flags the source')
})
