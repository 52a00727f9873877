import t, { type Test } from 'tap'
import { generateCreatorKey } from '../../harness/signed-push.js'
import { call, payload, provision, push, type Provisioned } from '../helpers/api.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { startTestGateway } from '../helpers/gateway-process.js'

// A signal moves from accepted to disputed once compromise evidence is accepted. The
// compromise flow: revoke the leaked key, rotate, open a dispute, the review decides.

const gw = await startTestGateway(t)

interface Compromised {
  readonly src: Provisioned
  /** Accepted under the leaked key before its revocation. */
  readonly leaked: Array<Record<string, unknown>>
  /** Their 202 answers. */
  readonly answers: Array<{ signal_id: string; received_at: string }>
  /** A signal the new key signed. */
  readonly rotated: { signal_id: string; received_at: string }
  readonly leakedKeyId: string
  /** The key that replaced it. */
  readonly sign: (p: Record<string, unknown>) => ReturnType<Provisioned['sign']>
}

/** A source whose first key signed two signals, then was replaced and revoked. */
async function compromised(t: Test, g: LaunchedGateway = gw, leakedCount = 2): Promise<Compromised> {
  const src = await provision(g)
  const leaked = Array.from({ length: leakedCount }, () => payload(src.sourceId))
  const answers = []
  for (const p of leaked) {
    const res = await push(g, src.sign(p))
    t.equal(res.status, 202)
    answers.push(res.body)
  }
  const next = generateCreatorKey()
  const registered = await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken, body: { public_key: next.publicKeyBase64 } })
  const keyId = registered.body.data.key_id as string
  const sign = (p: Record<string, unknown>) => src.sign(p, { key: next, keyId })
  t.equal((await push(g, sign(payload(src.sourceId)))).status, 202, 'the new key test signal')
  t.equal((await call(g.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${keyId}/promote`, { token: src.creatorToken })).status, 200)
  const rotated = await push(g, sign(payload(src.sourceId)))
  t.equal(rotated.status, 202)
  return { src, leaked, answers, rotated: rotated.body, leakedKeyId: src.keyId, sign }
}

const revoke = (c: Compromised, g: LaunchedGateway = gw) =>
  call(g.url, 'POST', `/v1/byo/sources/${c.src.sourceId}/keys/${c.leakedKeyId}/revoke`, { token: c.src.creatorToken })

const open = (c: Compromised, body: unknown, token = c.src.creatorToken, g: LaunchedGateway = gw) =>
  call(g.url, 'POST', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token, body })

const decide = (c: Compromised, disputeId: string, action: 'accept' | 'reject', token = gw.adminToken, body?: unknown, g: LaunchedGateway = gw) =>
  call(g.url, 'POST', `/v1/byo/sources/${c.src.sourceId}/disputes/${disputeId}/${action}`, { token, body })

const named = (...answers: Array<{ signal_id: string; received_at: string }>) => answers.map(({ signal_id, received_at }) => ({ signal_id, received_at }))
const disputeOf = (c: Compromised, signals = named(...c.answers)) => ({ key_id: c.leakedKeyId, signals, evidence: 'the key leaked in a public CI log on 2026-11-20' })

t.test('a dispute needs the leaked key revoked first: 409 key_not_revoked', async (t) => {
  const c = await compromised(t)
  const res = await open(c, disputeOf(c))
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'key_not_revoked')
  t.same((await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token: c.src.creatorToken })).body.data, [], 'nothing was opened')
})

t.test('an accepted dispute moves its signals from accepted to disputed; the others stay accepted', async (t) => {
  const c = await compromised(t)
  const firstAnswers = []
  for (const p of c.leaked) firstAnswers.push((await push(gw, c.sign(p))).body)
  t.same(
    firstAnswers.map((b) => [b.status, b.deduplicated, b.disputed]),
    [
      ['accepted', true, undefined],
      ['accepted', true, undefined],
    ],
    'before any dispute a replay under the new key is an accepted duplicate',
  )
  t.equal((await revoke(c)).status, 200)

  const opened = await open(c, disputeOf(c, named(c.answers[0]!)))
  t.equal(opened.status, 201)
  t.match(opened.body.data, { source_id: c.src.sourceId, creator_id: c.src.creatorId, key_id: c.leakedKeyId, state: 'open', resolved_at: null, opened_by: c.src.creatorId })
  t.equal(opened.body.data.signals.length, 1)
  t.match(opened.body.data.signals[0], { signal_id: c.answers[0]!.signal_id, received_at: c.answers[0]!.received_at, seq: Number })
  const disputeId = opened.body.data.dispute_id as string
  t.equal((await push(gw, c.sign(c.leaked[0]!))).body.disputed, undefined, 'an open dispute changes no state')
  const state = (signalId: string) => call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/signals/${signalId}`, { token: c.src.creatorToken })
  t.same((await state(c.answers[0]!.signal_id)).body.data, { signal_id: c.answers[0]!.signal_id, source_id: c.src.sourceId, state: 'accepted', dispute_id: null })

  const decided = await decide(c, disputeId, 'accept', gw.adminToken, { resolution: 'signatures match the leaked key; emitted from an unknown host' })
  t.equal(decided.status, 200)
  t.equal(decided.body.data.state, 'accepted')
  t.type(decided.body.data.resolved_at, 'string')
  t.equal(decided.body.data.resolution, 'signatures match the leaked key; emitted from an unknown host')

  const replay = await push(gw, c.sign(c.leaked[0]!))
  t.equal(replay.status, 202, 'the signal stays in the record: a replay is still a deduplicated 202')
  t.equal(replay.body.status, 'accepted', 'the outcome of the request, not the signal state')
  t.equal(replay.body.disputed, true, 'and the state of the signal')
  t.equal(replay.body.deduplicated, true)
  t.equal(replay.body.received_at, c.answers[0]!.received_at, 'with its original arrival time')
  const other = await push(gw, c.sign(c.leaked[1]!))
  t.equal(other.body.disputed, undefined, 'a signal the dispute does not name stays accepted')
  t.same((await state(c.answers[0]!.signal_id)).body.data, { signal_id: c.answers[0]!.signal_id, source_id: c.src.sourceId, state: 'disputed', dispute_id: disputeId })
  t.equal((await state(c.answers[1]!.signal_id)).body.data.state, 'accepted')
  const never = await state('sig_never_sent_here')
  t.equal(never.status, 404)

  const listed = await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes/${disputeId}`, { token: c.src.creatorToken })
  t.equal(listed.body.data.state, 'accepted', 'the creator reads the decision')
})

t.test('a rejected dispute changes no signal, and a decision is final', async (t) => {
  const c = await compromised(t)
  t.equal((await revoke(c)).status, 200)
  const disputeId = (await open(c, disputeOf(c))).body.data.dispute_id as string
  const rejected = await decide(c, disputeId, 'reject')
  t.equal(rejected.status, 200)
  t.equal(rejected.body.data.state, 'rejected')
  t.equal(rejected.body.data.resolution, null)
  t.equal((await push(gw, c.sign(c.leaked[0]!))).body.disputed, undefined)
  const again = await decide(c, disputeId, 'reject')
  t.equal(again.status, 200, 'repeating the decision changes nothing')
  t.equal(again.body.data.resolved_at, rejected.body.data.resolved_at)
  const reversed = await decide(c, disputeId, 'accept')
  t.equal(reversed.status, 409)
  t.equal(reversed.body.error.code, 'invalid_dispute_state')
  t.equal((await push(gw, c.sign(c.leaked[0]!))).body.disputed, undefined, 'the refused reversal disputed nothing')
})

t.test('only the review (admin token) decides; other creators and renters learn nothing of the source', async (t) => {
  const c = await compromised(t)
  t.equal((await revoke(c)).status, 200)
  const disputeId = (await open(c, disputeOf(c))).body.data.dispute_id as string
  const own = await decide(c, disputeId, 'accept', c.src.creatorToken)
  t.equal(own.status, 403, 'the creator cannot accept its own dispute')
  t.equal(own.body.error.code, 'forbidden')

  const stranger = await provision(gw)
  for (const [method, path, body] of [
    ['GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, undefined],
    ['GET', `/v1/byo/sources/${c.src.sourceId}/disputes/${disputeId}`, undefined],
    ['POST', `/v1/byo/sources/${c.src.sourceId}/disputes`, disputeOf(c)],
    ['GET', `/v1/byo/sources/${c.src.sourceId}/signals/${c.answers[0]!.signal_id}`, undefined],
  ] as const) {
    const res = await call(gw.url, method, path, { token: stranger.creatorToken, body })
    t.equal(res.status, 404, `${method} ${path} by another creator`)
    t.equal(res.body.error.message, 'no such source', 'the same answer as for a source that does not exist')
  }
  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'dispute-probe' } })).body.data.token
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token: renter })).status, 403)
  const missing = await decide(c, 'dsp_nothing', 'accept')
  t.equal(missing.status, 404)
  t.equal(missing.body.error.message, 'no such dispute for this source')
  const elsewhere = await call(gw.url, 'GET', `/v1/byo/sources/${stranger.sourceId}/disputes/${disputeId}`, { token: stranger.creatorToken })
  t.equal(elsewhere.status, 404, 'a dispute is found only under its own source')
})

t.test('a dispute names only signals the leaked key signed, found in the log by the received_at of their 202', async (t) => {
  const c = await compromised(t)
  t.equal((await revoke(c)).status, 200)
  const refusal = async (what: string, signals: unknown, pattern: RegExp) => {
    const res = await open(c, disputeOf(c, signals as ReturnType<typeof named>))
    t.equal(res.status, 400, what)
    t.equal(res.body.error.code, 'unknown_signal', what)
    t.match(res.body.error.message, pattern, what)
  }
  const [first] = c.answers
  await refusal('a signal never sent', [...named(...c.answers), { signal_id: 'sig_never_sent_here', received_at: first!.received_at }], /sig_never_sent_here: the source accepted no such signal/)
  const later = new Date(Date.parse(first!.received_at) + 1).toISOString()
  await refusal('the right id at another received_at', [{ signal_id: first!.signal_id, received_at: later }], /no such signal at that received_at/)
  await refusal('a signal of the key that replaced it', named(c.rotated), new RegExp(`signed by key key_[^ ]+, not by ${c.leakedKeyId}`))
  const other = await provision(gw)
  const theirs = await push(gw, other.sign(payload(other.sourceId)))
  t.equal(theirs.status, 202)
  await refusal('a signal of another source', named(theirs.body), /no such signal/)

  // The test signal that let the leaked key be promoted: recorded, never delivered.
  const keys = await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/keys`, { token: c.src.creatorToken })
  t.type(keys.body.data.find((k: { key_id: string }) => k.key_id === c.leakedKeyId).tested_at, 'string')
  const test = await provision(gw, { activate: false })
  const testAnswer = await push(gw, test.sign(payload(test.sourceId)))
  t.equal(testAnswer.body.test, true)
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${test.sourceId}/keys/${test.keyId}/revoke`, { token: test.creatorToken })).status, 200)
  const testDispute = await call(gw.url, 'POST', `/v1/byo/sources/${test.sourceId}/disputes`, {
    token: test.creatorToken,
    body: { key_id: test.keyId, signals: named(testAnswer.body), evidence: 'leaked' },
  })
  t.equal(testDispute.status, 400)
  t.match(testDispute.body.error.message, /test signal/)

  const bad: Array<[string, unknown]> = [
    ['no signals', { ...disputeOf(c), signals: [] }],
    ['a repeated signal', { ...disputeOf(c), signals: [...named(first!), ...named(first!)] }],
    ['101 signals', { ...disputeOf(c), signals: Array.from({ length: 101 }, (_, i) => ({ signal_id: `sig_many_${i}`, received_at: first!.received_at })) }],
    ['an id of 7 characters', { ...disputeOf(c), signals: [{ signal_id: 'sig_123', received_at: first!.received_at }] }],
    ['no received_at', { ...disputeOf(c), signals: [{ signal_id: first!.signal_id }] }],
    ['a received_at that is no time', { ...disputeOf(c), signals: [{ signal_id: first!.signal_id, received_at: 'yesterday' }] }],
    ['no evidence', { key_id: c.leakedKeyId, signals: named(first!) }],
    ['empty evidence', { ...disputeOf(c), evidence: '' }],
    ['1,001 characters of evidence', { ...disputeOf(c), evidence: 'x'.repeat(1001) }],
    ['an unknown field', { ...disputeOf(c), severity: 'critical' }],
  ]
  for (const [what, body] of bad) {
    const res = await open(c, body)
    t.equal(res.status, 400, what)
    t.equal(res.body.error.code, 'invalid_request', what)
  }
  const noKey = await open(c, { ...disputeOf(c), key_id: 'key_unknown' })
  t.equal(noKey.status, 404)
  t.equal(noKey.body.error.message, 'no such key for this source')
  t.same((await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token: c.src.creatorToken })).body.data, [], 'no refused dispute was kept')
  t.equal((await open(c, { ...disputeOf(c), evidence: 'x'.repeat(1000) })).status, 201, '1,000 characters are allowed')
})

t.test('a source holds at most 16 disputes, listed newest first', async (t) => {
  const c = await compromised(t, gw, 17)
  t.equal((await revoke(c)).status, 200)
  const ids: string[] = []
  for (let i = 0; i < 16; i++) {
    const res = await open(c, disputeOf(c, named(c.answers[i]!)))
    t.equal(res.status, 201)
    ids.push(res.body.data.dispute_id)
  }
  const again = await open(c, disputeOf(c, named(c.answers[0]!)))
  t.equal(again.status, 409)
  t.equal(again.body.error.code, 'already_exists', 'a signal an open dispute names')
  const res = await open(c, disputeOf(c, named(c.answers[16]!)))
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'limit_exceeded')
  const listed = await call(gw.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token: c.src.creatorToken })
  t.same(
    listed.body.data.map((d: { dispute_id: string }) => d.dispute_id),
    ids.reverse(),
  )
})

t.test('disputes and the disputed state survive kill -9', async (t) => {
  const first = await startTestGateway(t)
  const c = await compromised(t, first)
  t.equal((await revoke(c, first)).status, 200)
  const accepted = (await open(c, disputeOf(c, named(c.answers[0]!)), c.src.creatorToken, first)).body.data.dispute_id as string
  const pending = (await open(c, disputeOf(c, named(c.answers[1]!)), c.src.creatorToken, first)).body.data.dispute_id as string
  t.equal((await decide(c, accepted, 'accept', first.adminToken, undefined, first)).status, 200)
  await first.kill()

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const replay = await push(second, c.sign(c.leaked[0]!))
  t.equal(replay.status, 202)
  t.equal(replay.body.disputed, true)
  t.equal((await push(second, c.sign(c.leaked[1]!))).body.disputed, undefined)
  const listed = await call(second.url, 'GET', `/v1/byo/sources/${c.src.sourceId}/disputes`, { token: c.src.creatorToken })
  t.same(
    listed.body.data.map((d: { dispute_id: string; state: string }) => [d.dispute_id, d.state]),
    [
      [pending, 'open'],
      [accepted, 'accepted'],
    ],
  )
  t.equal((await decide(c, pending, 'accept', second.adminToken, undefined, second)).status, 200, 'the open one can still be decided')
  t.equal((await push(second, c.sign(c.leaked[1]!))).body.disputed, true)
})
