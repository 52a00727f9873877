import t from 'tap'
import { Compile } from 'typebox/compile'
import { signalAcceptedEvent } from '../../delivery/index.js'
import type { SignalRecord } from '../../pipeline/index.js'
import { receiptIdOf } from '../../receipts/index.js'
import { SignalAcceptedEvent } from '../../schemas/index.js'

const record: SignalRecord = {
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
  note: 'n',
  idempotency_key: null,
  body_sha256: 'ab',
  request_timestamp: '2026-11-21T10:00:00.050Z',
  nonce: 'nonce-1',
  signature: 'c2ln',
  body: '{}',
}

t.test('an accepted signal becomes a byo.signal.accepted event with the fields of a delivered signal', async (t) => {
  const event = signalAcceptedEvent(record, 'rent_1', 7)
  t.ok(Compile(SignalAcceptedEvent).Check(event), 'matches the event schema')
  t.same(event, {
    event: 'byo.signal.accepted',
    event_id: '7',
    rental_id: 'rent_1',
    source_id: 'src_a',
    signal_id: 'sig_00000001',
    token: record.token,
    severity: 'warning',
    emitted_at: record.emitted_at,
    received_at: record.received_at,
    receipt_id: receiptIdOf('src_a', 'sig_00000001'),
    confidence: 80,
    note: 'n',
  })
})

t.test('the event leaks none of the signing material', async (t) => {
  const text = JSON.stringify(signalAcceptedEvent(record, 'rent_1', 7))
  for (const secret of ['nonce-1', 'key_a', 'c2ln', 'body_sha256']) t.notOk(text.includes(secret), secret)
})

t.test('a test signal of a pending key is never delivered', async (t) => {
  t.equal(signalAcceptedEvent({ ...record, test: true }, 'rent_1', 7), undefined)
})
