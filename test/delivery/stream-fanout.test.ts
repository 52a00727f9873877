import { setTimeout as sleep } from 'node:timers/promises'
import { EventSource } from 'eventsource'
import t from 'tap'
import { rentalEventOf } from '../../delivery/index.js'
import { sharedRentalEvent } from '../../delivery/shared-events.js'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import type { LogRecord, SignalRecord } from '../../pipeline/index.js'
import type { RentalRecord } from '../../rentals/index.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * The live fan-out: one event object per log record and rental, shared by the rental's
 * streams (so it is serialised once), equal to what `rentalEventOf` makes; and through a
 * real gateway, bursts of signals accepted together reach every stream of a rental
 * whole, in log order, once each.
 */

const signal: SignalRecord = {
  v: 1,
  source_id: 'src_a',
  signal_id: 'sig_00000001',
  key_id: 'key_a',
  test: false,
  received_at: '2026-11-21T10:00:00.100Z',
  emitted_at: '2026-11-21T10:00:00.000Z',
  token: 'So11111111111111111111111111111111111111112',
  severity: 'warning',
  confidence: 80,
  note: null,
  idempotency_key: null,
  body_sha256: 'ab',
  request_timestamp: '2026-11-21T10:00:00.050Z',
  nonce: 'nonce-1',
  signature: 'c2ln',
  body: '{}',
}
// As the ingest pipeline writes it: the signal record as JSON.
const logRecord = (seq: number, r: SignalRecord = signal): LogRecord => ({ seq, dedupId: `${r.source_id}/${r.signal_id}`, sourceId: r.source_id, time: Date.parse(r.received_at), data: Buffer.from(JSON.stringify(r)) })
const rental: RentalRecord = {
  rental_id: 'rnt_a',
  renter_id: 'renter:a',
  source_id: 'src_a',
  creator_id: 'crt_a',
  state: 'active',
  starts_at: '2026-11-21T09:00:00.000Z',
  expires_at: null,
  ended_at: null,
  end_reason: null,
  created_at: '2026-11-21T09:00:00.000Z',
}

t.test('one event object per record and rental, exactly what rentalEventOf makes', async (t) => {
  const r = logRecord(5)
  const first = sharedRentalEvent(r, rental)
  t.same(first, rentalEventOf(r, rental))
  t.equal(sharedRentalEvent(r, rental), first, 'the rental\'s other streams get the same object')
  t.equal(sharedRentalEvent(r, { ...rental }), first, 'the same rental read again (a copy with the same span) too')
  const other = { ...rental, rental_id: 'rnt_b' }
  t.match(sharedRentalEvent(r, other), { rental_id: 'rnt_b', event_id: '5' }, 'another rental of the source gets its own')
  t.not(sharedRentalEvent(r, other), first)
})

t.test('a rental whose span changed is looked at afresh', async (t) => {
  const r = logRecord(6)
  t.ok(sharedRentalEvent(r, rental), 'delivered while active')
  const ended = { ...rental, state: 'ended' as const, ended_at: '2026-11-21T10:00:00.000Z', end_reason: 'ended' as const }
  t.equal(sharedRentalEvent(r, ended), undefined, 'received after the end: not delivered')
  t.equal(rentalEventOf(r, ended), undefined)
  const later = { ...rental, starts_at: '2026-11-21T11:00:00.000Z' }
  t.equal(sharedRentalEvent(r, later), undefined, 'received before a later start: not delivered')
})

t.test('test signals and other sources stay undelivered', async (t) => {
  t.equal(sharedRentalEvent(logRecord(7, { ...signal, test: true }), rental), undefined, 'a test signal')
  t.equal(sharedRentalEvent(logRecord(8, { ...signal, source_id: 'src_b' }), rental), undefined, 'another source')
  t.equal(sharedRentalEvent({ seq: 9, dedupId: 'x', sourceId: 'src_a', time: 0, data: Buffer.from('not json') }, rental), undefined, 'not a signal record')
})

t.test('through a gateway: bursts accepted together reach each of a rental\'s streams whole, in order, once', async (t) => {
  const gw: LaunchedGateway = await startTestGateway(t, { env: { STREAM_MAX_PER_RENTAL: '3', STREAM_RETRY_MS: '50' } })
  const src = await provision(gw)
  const renter = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'renter:fanout' } })
  t.equal(renter.status, 201)
  const token = renter.body.data.token as string
  const rented = await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: 'renter:fanout', source_id: src.sourceId } })
  t.equal(rented.status, 201)
  const rentalId = rented.body.data.rental_id as string

  const streams = [0, 1, 2].map(() => {
    const got: { id: string; signalId: string; eventId: string }[] = []
    const es = new EventSource(`${gw.url}/v1/rentals/${rentalId}/events`, {
      fetch: (input, init) => fetch(input, { ...init, headers: { ...(init?.headers as Record<string, string>), authorization: `Bearer ${token}` } }),
    })
    es.addEventListener('byo.signal.accepted', (e) => {
      const data = JSON.parse(e.data)
      got.push({ id: e.lastEventId, signalId: data.signal_id, eventId: data.event_id })
    })
    return { es, got }
  })
  t.teardown(() => streams.forEach((s) => s.es.close()))
  await sleep(300) // the streams are open and live

  // Bursts of concurrent pushes: the journal commits them in groups, and each group reaches the streams in one turn.
  const accepted: string[] = []
  for (let burst = 0; burst < 4; burst++) {
    const payloads = Array.from({ length: 60 }, () => payload(src.sourceId))
    const answers = await Promise.all(payloads.map((p) => push(gw, src.sign(p))))
    t.same([...new Set(answers.map((a) => a.status))], [202], `burst ${burst}: every push accepted`)
    accepted.push(...payloads.map((p) => p.signal_id as string))
  }
  const deadline = Date.now() + 15_000
  while (streams.some((s) => s.got.length < accepted.length) && Date.now() < deadline) await sleep(50)
  await sleep(300) // a duplicate would arrive meanwhile

  // The log's order, by polling: the streams must match it exactly.
  const polled: { signal_id: string; event_id: string }[] = []
  for (let after: string | null = null, i = 0; i < 50; i++) {
    const q: string = after === null ? '?limit=1000' : `?limit=1000&after=${after}`
    const page = await call(gw.url, 'GET', `/v1/rentals/${rentalId}/signals${q}`, { token })
    polled.push(...page.body.data)
    after = page.body.next_cursor
    if (after === null) break
  }
  t.same(polled.map((e) => e.signal_id).sort(), [...accepted].sort(), 'the log holds every accepted signal')
  for (const [i, s] of streams.entries()) {
    t.same(s.got.map((g) => g.signalId), polled.map((e) => e.signal_id), `stream ${i}: every signal once, in log order`)
    t.same(s.got.map((g) => g.id), polled.map((e) => e.event_id), `stream ${i}: each SSE id is the event_id`)
    t.same(s.got.filter((g) => g.id !== g.eventId), [], `stream ${i}: each data line belongs to its id: line`)
  }
})
