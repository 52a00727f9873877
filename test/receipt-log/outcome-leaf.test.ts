import t from 'tap'
import { decodeSignal } from '../../delivery/signal-event.js'
import { webhookEventOf } from '../../delivery/webhooks/webhook-event.js'
import { decodeSignalRecord, encodeOutcomes, isMarkerData, outcomesIn, type LogRecord, type OutcomeItem } from '../../pipeline/index.js'
import { buildOutcome } from '../../receipt-log/leaf-builder.js'
import { outcomeChanges } from '../../receipt-log/outcome-rule.js'
import { mapRecord } from '../../recorder/receipt-input.js'
import { decodeLeaf, encodeLeaf, LeafFormatError, type OutcomeLeaf } from '../../sdk/index.js'
import type { RentalRecord } from '../../rentals/index.js'

const verdict = (over: Partial<OutcomeItem> = {}): OutcomeItem => ({
  receipt_id: 'rc_0123456789abcdef0123456789abcdef',
  window_start: '2030-01-01T00:00:00.000Z',
  window_end: '2030-01-01T01:00:00.000Z',
  baseline: 1.5,
  outcome: 'hit',
  scored_at: '2030-01-01T02:00:00.000Z',
  ...over,
})
const leafOf = (item: OutcomeItem): OutcomeLeaf => buildOutcome(item, 1, 0).decoded

t.test('an outcome leaf encodes as documented and decodes back to the same verdict', async (t) => {
  const leaf: OutcomeLeaf = { kind: 'outcome', ...verdict({ baseline: -0.25 }) }
  const bytes = encodeLeaf(leaf)
  const str = (s: string) => [0, s.length, ...Buffer.from(s)]
  const expected = [1, 3, ...str(leaf.receipt_id), ...str('hit'), ...str(leaf.window_start), ...str(leaf.window_end), ...str('-0.25'), ...str(leaf.scored_at)]
  t.same([...bytes], expected, 'version 1, kind 3, six length-prefixed texts')
  t.same(decodeLeaf(bytes), leaf)
  t.same(buildOutcome(verdict(), 7, 12).entry, { leaf_index: 12, seq: 7, kind: 'outcome', entry_id: verdict().receipt_id, leaf: Buffer.from(encodeLeaf({ kind: 'outcome', ...verdict() })).toString('base64') })
})

t.test('decoding refuses an outcome leaf with an unknown outcome, a baseline not in its one spelling, or trailing bytes', async (t) => {
  const good = Buffer.from(encodeLeaf({ kind: 'outcome', ...verdict() }))
  const withBaseline = (text: string) => Buffer.from(good.toString('latin1').replace('\x00\x031.5', `\x00${String.fromCharCode(text.length)}${text}`), 'latin1')
  t.throws(() => decodeLeaf(withBaseline('1.50')), LeafFormatError, '1.50 is not 1.5\'s spelling')
  t.throws(() => decodeLeaf(withBaseline('NaN')), LeafFormatError)
  t.same(decodeLeaf(withBaseline('2.5')), { kind: 'outcome', ...verdict({ baseline: 2.5 }) }, 'the edit itself is sound')
  t.throws(() => decodeLeaf(Buffer.from(good.toString('latin1').replace('\x00\x03hit', '\x00\x03bad'), 'latin1')), LeafFormatError)
  t.throws(() => decodeLeaf(Buffer.concat([good, Buffer.of(0)])), LeafFormatError)
  t.throws(() => encodeLeaf({ kind: 'outcome', ...verdict({ baseline: Number.POSITIVE_INFINITY }) }), LeafFormatError)
})

t.test('a verdict changes its receipt only when it is the first, newer, or differs at the same scored_at', async (t) => {
  const last = leafOf(verdict())
  t.equal(outcomeChanges(undefined, verdict()), true, 'the first verdict')
  t.equal(outcomeChanges(last, verdict()), false, 'the same verdict posted again')
  t.equal(outcomeChanges(last, verdict({ scored_at: '2030-01-01T02:00:00+00:00' })), false, 'the same instant spelled otherwise')
  t.equal(outcomeChanges(last, verdict({ outcome: 'miss', scored_at: '2030-01-01T01:59:59.999Z' })), false, 'an older verdict loses, whatever it says')
  t.equal(outcomeChanges(last, verdict({ outcome: 'miss' })), true, 'another outcome at the same scored_at: the later post wins')
  t.equal(outcomeChanges(last, verdict({ baseline: 1.25 })), true, 'another baseline')
  t.equal(outcomeChanges(last, verdict({ window_end: '2030-01-01T01:30:00.000Z' })), true, 'another window')
  t.equal(outcomeChanges(last, verdict({ scored_at: '2030-01-01T03:00:00.000Z' })), true, 'a newer scoring, even of the same outcome, is the receipt\'s verdict from then on')
})

t.test('an outcome record is a marker every reader of signals passes over', async (t) => {
  const data = encodeOutcomes([verdict(), verdict({ receipt_id: 'rc_ffffffffffffffffffffffffffffffff', outcome: 'void' })])
  const record: LogRecord = { seq: 9, dedupId: 'outcomes/post/x', sourceId: '', time: Date.now(), data }
  t.equal(isMarkerData(data), true)
  t.same(outcomesIn(record), [verdict(), verdict({ receipt_id: 'rc_ffffffffffffffffffffffffffffffff', outcome: 'void' })])
  t.throws(() => decodeSignalRecord(data), TypeError, 'not a signal record')
  t.same(mapRecord(record, () => 'agent'), { kind: 'not_a_signal' }, 'the recorder makes no receipt of it')
  t.equal(decodeSignal(data), undefined, 'streams and polling send nothing for it')
  t.equal(webhookEventOf(record, { source_id: 'src' } as RentalRecord), undefined, 'webhooks send nothing for it')
  t.equal(outcomesIn({ ...record, data: Buffer.from('{"v":1,"source_id":"s"}') }), undefined, 'a signal record is not one')
})
