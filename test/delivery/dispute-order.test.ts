import { generateKeyPairSync } from 'node:crypto'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { cursorOf, LiveTail, parseEventId, scanRentalEvents, StreamSession, type RentalDisputes, type ScanStart } from '../../delivery/index.js'
import { openJournal, type Journal } from '../../pipeline/index.js'
import { DisputeGate, type DisputedSignal } from '../../registry/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { acceptDispute } from '../helpers/accept-dispute.js'
import { MANIFEST } from '../helpers/api.js'
import { openRegistry, registryBucket, storedEntries } from '../helpers/registry-bucket.js'

/**
 * The rental's one order in process: a real journal, a real registry on an in-memory
 * store whose writes the test can hold, and the scan that replay and polling share.
 */

const T0 = '2020-01-01T00:00:00.000Z'

async function setup(t: Test) {
  const dir = await mkdtemp(join(tmpdir(), 'dispute-order-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const log: Journal = await openJournal({ dir: join(dir, 'journal'), fsync: 'never', dedupWindowMs: 0 })
  t.teardown(() => log.close())
  const store = await registryBucket(t)
  const registry = await openRegistry(t, store, 'admin')
  const agent = await registry.createAgent({ agent_id: 'a', creator_id: 'c', slots: 1 })
  const source = await registry.createSource({ agent, manifest: structuredClone(MANIFEST) as any, listing: { public_receipts: false } })
  const key = await registry.addKey(source.source_id, generateKeyPairSync('ed25519').publicKey.export({ format: 'der', type: 'spki' }).subarray(-32))
  await registry.revokeKey(source.source_id, key.key_id)
  const rental: RentalRecord = { rental_id: 'rnt_1', renter_id: 'r', source_id: source.source_id, creator_id: 'c', state: 'active', starts_at: T0, expires_at: null, ended_at: null, end_reason: null, created_at: T0 }
  const signals: DisputedSignal[] = []
  const append = async (n: number) => {
    for (let i = 0; i < n; i++) {
      const record = {
        v: 1, source_id: source.source_id, signal_id: `sig_${String(signals.length + 1).padStart(8, '0')}`, key_id: key.key_id, test: false,
        received_at: new Date().toISOString(), emitted_at: new Date().toISOString(), token: 'So11111111111111111111111111111111111111112',
        severity: 'warning', confidence: 80, note: 'n', idempotency_key: null, body_sha256: 'ab', request_timestamp: new Date().toISOString(),
        nonce: `nonce-${signals.length}`, signature: 'c2ln', body: '{}',
      }
      const { seq } = await log.append(record.signal_id, Buffer.from(JSON.stringify(record)), { sourceId: source.source_id })
      signals.push({ signal_id: record.signal_id, received_at: record.received_at, seq })
    }
  }
  const open = (named: DisputedSignal[]) => registry.openDispute({ source, keyId: key.key_id, signals: named, evidence: 'leaked', openedBy: 'c' })
  const accept = (disputeId: string) => acceptDispute(log, registry, source.source_id, disputeId)
  /** Every event from `after`, a page of `limit` at a time, as polling reads them (stopping where a page waits at a placement). */
  const scanAll = async (after: string | undefined, limit = 100, disputes: RentalDisputes = registry) => {
    const out: string[] = []
    let start: ScanStart = {}
    if (after !== undefined) {
      const c = cursorOf(parseEventId(after)!, registry, source.source_id)
      start = { afterSeq: c.seq, ...(c.dispute && { dispute: c.dispute }) }
    }
    for (let i = 0; i < 100; i++) {
      const toSeq = (await log.info()).lastSeq
      const page = await scanRentalEvents(log, () => rental, start, toSeq, limit, 50_000, disputes)
      out.push(...page.events.map((e) => e.event_id))
      if ((page.complete && page.events.length < limit) || page.waitingFor !== undefined) return { ids: out, cursor: page.cursor, waitingFor: page.waitingFor }
      start = { afterSeq: page.cursor.seq, ...(page.cursor.dispute && { dispute: page.cursor.dispute }) }
    }
    throw new Error('the scan did not end')
  }
  return { log, store, registry, source, rental, signals, append, open, accept, scanAll }
}

t.test('a record appended while a dispute is being recorded is not delivered before it', async (t) => {
  const s = await setup(t)
  await s.append(3)
  const dispute = await s.open([s.signals[1]!, s.signals[0]!])
  // The registry write takes a while: meanwhile two more signals are appended, and a poll reads.
  let write!: () => void
  s.store.hold = new Promise<void>((resolve) => (write = resolve))
  const accepting = s.accept(dispute.dispute_id)
  await new Promise((r) => setTimeout(r, 20))
  await s.append(2)
  const during = await s.scanAll(undefined)
  t.same(during.ids, ['1', '2', '3'], 'the poll stops at the dispute\'s placement')
  t.equal(during.waitingFor?.seq, 4, 'and waits there')
  write()
  const accepted = await accepting
  t.equal(accepted.after_seq, 4, 'the dispute is placed after its placement record')
  t.same((await s.scanAll('3')).ids, ['4.d1', '4.d2', '5', '6'], 'the next poll gets the dispute first, then the later records')
  t.same((await s.scanAll(undefined, 1)).ids, ['1', '2', '3', '4.d1', '4.d2', '5', '6'], 'one event a page: the same order')
})

t.test('a live stream waits at the placement of a dispute being recorded, then sends its events before the records after it', async (t) => {
  const s = await setup(t)
  const tail = await LiveTail.start(s.log, (err) => t.error(err))
  t.teardown(() => tail.close())
  const sent: string[] = []
  const sink = { send: (e: { event_id: string }) => sent.push(e.event_id) > 0, writable: () => Promise.resolve(), end: () => undefined, closed: false }
  const session = new StreamSession(s.rental, s.log, tail, () => s.rental, sink, undefined, s.registry)
  t.teardown(() => session.stop())
  const unwatch = s.registry.watchDisputes((changed) => {
    for (const d of changed) if (typeof d.after_seq === 'number') session.disputesChanged(d.after_seq)
  })
  t.teardown(unwatch)
  await session.start()
  await s.append(3)
  await tail.reached(3)
  const dispute = await s.open([s.signals[1]!, s.signals[0]!])
  let write!: () => void
  s.store.hold = new Promise<void>((resolve) => (write = resolve))
  const accepting = s.accept(dispute.dispute_id)
  await s.append(2)
  await tail.reached(6)
  await new Promise((r) => setTimeout(r, 50))
  t.same(sent, ['1', '2', '3'], 'nothing after the placement while the dispute is not recorded')
  write()
  t.equal((await accepting).after_seq, 4)
  await new Promise((r) => setTimeout(r, 50))
  t.same(sent, ['1', '2', '3', '4.d1', '4.d2', '5', '6'], 'then the dispute, then the later records: the replay order')
  t.same((await s.scanAll(undefined)).ids, sent)
})

t.test('disputes placed after the same record come in the order accepted, and a resume from one gives the rest', async (t) => {
  const s = await setup(t)
  await s.append(4)
  const first = await s.open([s.signals[2]!])
  const second = await s.open([s.signals[0]!, s.signals[1]!])
  // As an earlier release recorded them, after the log's last record: both after record 4.
  await s.registry.resolveDispute(s.source.source_id, first.dispute_id, 'accepted', null, 4)
  await s.registry.resolveDispute(s.source.source_id, second.dispute_id, 'accepted', null, 4)
  t.same((await s.scanAll(undefined)).ids, ['1', '2', '3', '4', '4.d3', '4.d1', '4.d2'], 'the later acceptance after the earlier, whatever its signals')
  t.same((await s.scanAll('4.d3')).ids, ['4.d1', '4.d2'], 'resuming from the first dispute event still gives the second dispute')
  t.same((await s.scanAll('4.d1')).ids, ['4.d2'])
  t.same((await s.scanAll('4.d2')).ids, [])
})

t.test('an acceptance that cannot be recorded is never delivered', async (t) => {
  const s = await setup(t)
  await s.append(2)
  const dispute = await s.open([s.signals[0]!])
  s.store.hold = Promise.reject(Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' }))
  await t.rejects(s.accept(dispute.dispute_id), { code: 'ENOSPC' })
  await s.append(1)
  const held = await s.scanAll(undefined)
  t.same(held.ids, ['1', '2'], 'delivery waits at the placement of a dispute not recorded')
  t.equal(held.waitingFor?.seq, 3)
  // A gate whose wait (PLACEMENT_WAIT_MS in service) is short: once it has passed, the placement is passed over.
  const short: RentalDisputes = { acceptedDisputesOf: (id) => s.registry.acceptedDisputesOf(id), watchDisputes: (l) => s.registry.watchDisputes(l), disputeGate: new DisputeGate((src, d) => s.registry.dispute(src, d)?.state, Date.now, 50) }
  await new Promise((r) => setTimeout(r, 60))
  t.same((await s.scanAll(undefined, 100, short)).ids, ['1', '2', '4'], 'past the wait, the records after it go and the dispute never does')
  t.equal(s.registry.dispute(s.source.source_id, dispute.dispute_id)?.state, 'open')
})

t.test('an acceptance whose registry write would start past its bound is refused with not_ready and not recorded', async (t) => {
  const s = await setup(t)
  await s.append(2)
  const dispute = await s.open([s.signals[0]!])
  // The bound (the route's: PLACEMENT_WRITE_MS from before its append) has passed when the write would start.
  await t.rejects(s.registry.resolveDispute(s.source.source_id, dispute.dispute_id, 'accepted', null, 3, Date.now() - 1), { code: 'not_ready' })
  t.equal(s.registry.dispute(s.source.source_id, dispute.dispute_id)?.state, 'open', 'still open: a retry places it anew')
  t.equal((await s.accept(dispute.dispute_id)).state, 'accepted')
})

t.test('disputes accepted before their place was recorded get one derived alike in every process', async (t) => {
  const s = await setup(t)
  await s.append(3)
  const dispute = await s.open([s.signals[0]!, s.signals[1]!])
  await s.accept(dispute.dispute_id)
  // As the registry files of an older release held them, copied into the bucket: no after_seq, no accept_order.
  const key = `disputes.${s.source.source_id}`
  const entry = (await storedEntries(s.store)).get(key)
  for (const d of entry.disputes) {
    delete d.after_seq
    delete d.accept_order
  }
  await s.store.put(key, Buffer.from(JSON.stringify(entry)))
  const a = await openRegistry(t, s.store, 'admin')
  const b = await openRegistry(t, s.store, 'admin')
  const placed = a.acceptedDisputesOf(s.source.source_id)[0]
  t.equal(placed?.after_seq, 2, 'after the greatest seq among its signals')
  t.equal(placed?.accept_order, 0)
  t.same(b.acceptedDisputesOf(s.source.source_id), a.acceptedDisputesOf(s.source.source_id), 'the same in another process')
  const next = await a.openDispute({ source: s.source, keyId: placed!.key_id, signals: [s.signals[2]!], evidence: 'e', openedBy: 'c' })
  t.equal((await a.resolveDispute(s.source.source_id, next.dispute_id, 'accepted', null, 3)).accept_order, 1, 'the next acceptance is ordered after it')
})
