import { generateKeyPairSync } from 'node:crypto'
import t, { type Test } from 'tap'
import type { DisputedSignal } from '../../registry/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { acceptDispute } from '../helpers/accept-dispute.js'
import { MANIFEST } from '../helpers/api.js'
import { openRegistry, registryBucket } from '../helpers/registry-bucket.js'
import { sharedReceiver, signalOf, until, webhookFixture } from '../helpers/webhook-fixture.js'

/**
 * Dispute events through a webhook loop fed by the log tail, with a real registry (on an
 * in-memory store) and the position key holding the full point in the rental's order:
 * the dispute events go out in their place, the position never passes one not yet
 * delivered, a restart resumes at it, and the key an earlier release kept the last
 * dispute event in is folded into the position.
 */

const T0 = '2020-01-01T00:00:00.000Z'

async function setup(t: Test, answer?: (eventId: string) => number) {
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store, 'admin')
  const agent = await registry.createAgent({ agent_id: 'a', creator_id: 'c', slots: 1 })
  const source = await registry.createSource({ agent, manifest: structuredClone(MANIFEST) as any, listing: { public_receipts: false } })
  const key = await registry.addKey(source.source_id, generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32))
  await registry.revokeKey(source.source_id, key.key_id)
  const rental: RentalRecord = { rental_id: 'rnt_disputes', renter_id: 'r', source_id: source.source_id, creator_id: 'c', state: 'active', starts_at: T0, expires_at: null, ended_at: null, end_reason: null, created_at: T0 }
  const eventOf = (body: string) => (JSON.parse(body) as { event_id: string }).event_id
  const rx = await sharedReceiver(t, (_req, res, d) => res.writeHead(answer?.(eventOf(d.body)) ?? 204).end())
  const s = await webhookFixture(t, [rental], { disputes: registry, retryDelaysMs: [100], checkpointMs: 20 })
  const signals: DisputedSignal[] = []
  let n = 0
  const append = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const bytes = signalOf(++n, source.source_id)
      const { seq } = await s.journal.append(`d${n}`, bytes, { sourceId: source.source_id })
      const parsed = JSON.parse(Buffer.from(bytes).toString()) as { signal_id: string; received_at: string }
      signals.push({ signal_id: parsed.signal_id, received_at: parsed.received_at, seq })
    }
  }
  /**
   * As the accept route does (its placement in the log, then the record); `earlier`: as an
   * earlier release did, after the log's last record. `opened` runs between the opening and the acceptance.
   */
  const dispute = async (named: DisputedSignal[], earlier = false, opened_ = () => {}) => {
    const opened = await registry.openDispute({ source, keyId: key.key_id, signals: named, evidence: 'leaked', openedBy: 'c' })
    opened_()
    if (!earlier) return acceptDispute(s.journal, registry, source.source_id, opened.dispute_id)
    return registry.resolveDispute(source.source_id, opened.dispute_id, 'accepted', null, (await s.journal.info()).lastSeq)
  }
  const events = () => rx.got.map((d) => eventOf(d.body))
  return { s, rx, rental, signals, append, dispute, events, store }
}

t.test('a dispute accepted while the loop waits is delivered in its place; a failing dispute event holds the position, and a restart resumes at it', async (t) => {
  let failing = true
  const { s, rx, rental, signals, append, dispute, events } = await setup(t, (id) => (id.endsWith('.d3') && failing ? 500 : 204))
  await s.register(rx.base)
  await append(3)
  await until(() => events().length === 3)
  await until(async () => (await s.state.position(rental.rental_id))?.seq === 3)
  const d = await dispute([signals[0]!, signals[2]!])
  // Accepted while the loop waits at the tail's end: its first event goes out, the second fails.
  await until(() => events().filter((e) => e === '4.d3').length >= 2)
  await append(2)
  await new Promise((r) => setTimeout(r, 300))
  t.same([...new Set(events())], ['1', '2', '3', '4.d1', '4.d3'], 'nothing after the failing dispute event (placed after its placement record, 4)')
  const held = await s.state.position(rental.rental_id)
  t.same(held, { seq: 4, dispute: { order: d.accept_order ?? 0, signalSeq: signals[0]!.seq } }, 'the position holds the dispute event delivered, not the failing one')
  t.equal((await s.state.pending(rental.rental_id))?.event_id, '4.d3', 'the failing dispute event keeps its retry state')

  await s.restart()
  failing = false
  await until(() => events().includes('6'))
  await until(async () => (await s.state.position(rental.rental_id))?.seq === 6)
  const firsts = [...new Set(events())]
  t.same(firsts, ['1', '2', '3', '4.d1', '4.d3', '5', '6'], 'every event once at its place, in the rental\'s order')
  t.same(events().filter((e) => e !== '4.d3'), firsts.filter((e) => e !== '4.d3'), 'only the failing event was sent more than once')
  t.same(new Set(rx.got.filter((g) => g.body.includes('"4.d3"')).map((g) => g.id)), new Set([`msg_${rental.rental_id}_4.d3`]), 'its webhook-id is the same on every attempt, also after the restart')
  t.equal(await s.state.pending(rental.rental_id), null, 'no retry state once it is delivered')
  t.same(s.errors, [])
})

t.test('a loop reaching the placement of a dispute being recorded waits there, then delivers its events before the records after it', async (t) => {
  const { s, rx, signals, append, dispute, events, store } = await setup(t)
  await s.register(rx.base)
  await append(3)
  await until(() => events().length === 3)
  let write!: () => void
  let placed!: () => void
  const opened = new Promise<void>((resolve) => (placed = resolve))
  const accepting = dispute([signals[0]!, signals[2]!], false, () => {
    store.hold = new Promise<void>((resolve) => (write = resolve))
    placed()
  })
  await opened
  // The placement is appended at once (the acceptance's first step), before these.
  await new Promise((r) => setTimeout(r, 20))
  await append(2)
  await new Promise((r) => setTimeout(r, 300))
  t.same(events(), ['1', '2', '3'], 'nothing after the placement while the dispute is not recorded')
  write()
  t.equal((await accepting).after_seq, 4)
  await until(() => events().length === 7)
  t.same(events(), ['1', '2', '3', '4.d1', '4.d3', '5', '6'], 'then the dispute, then the later records')
  t.same(s.errors, [])
})

t.test('the last dispute event an earlier release kept in disputed.<rental_id> is folded into the position and the key removed', async (t) => {
  const { s, rx, rental, signals, append, dispute, events } = await setup(t)
  await append(3)
  const d = await dispute([signals[0]!, signals[2]!], true)
  // As an earlier release left it: the endpoint from the first record, its dispute cursor after the first dispute event.
  await s.bucket.put(`disputed.${rental.rental_id}`, Buffer.from(JSON.stringify({ seq: 3, order: d.accept_order ?? 0, signal_seq: signals[0]!.seq })))
  await s.register(rx.base, [rental], 1)
  await append(1)
  await until(() => events().includes('4'))
  t.same(events(), ['3.d3', '4'], 'resumes after the dispute event the key named')
  await until(async () => (await s.state.position(rental.rental_id))?.seq === 4)
  t.equal(await s.bucket.get(`disputed.${rental.rental_id}`), null, 'the old key is gone')
  t.same(s.errors, [])
})
