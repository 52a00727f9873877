import fc from 'fast-check'
import t from 'tap'
import type Type from 'typebox'
import { Value } from 'typebox/value'
import {
  isValidSignalId,
  SIGNAL_ID_PATTERN,
  type SignalPayload,
  type SignalRules,
  validateSignalFields,
} from '../../pipeline/validate/signal-fields.js'
import { SignalPayloadSchema } from '../../schemas/index.js'

const NOW = Date.UTC(2025, 5, 15, 12, 0, 0)
const SOL_MINT = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'
const EVM_TOKEN = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'
const rules: SignalRules = {
  sourceId: 'src_test_01',
  severityLevels: ['low', 'medium', 'high'],
  chains: ['solana', 'ethereum'],
  requestTimeMs: NOW,
  requestTimestamp: new Date(NOW).toISOString(),
}
const iso = (ms: number): string => new Date(ms).toISOString()

function payload(patch: Record<string, unknown> = {}): Record<string, unknown> {
  const p: Record<string, unknown> = {
    signal_id: 'sig_00000001',
    source_id: 'src_test_01',
    ts: iso(NOW - 2_000),
    token: SOL_MINT,
    severity: 'high',
    ...patch,
  }
  for (const [k, v] of Object.entries(patch)) if (v === undefined) delete p[k]
  return p
}
/** The error code, or 'ok'. */
const codeOf = (p: unknown, r: SignalRules = rules): string => {
  const c = validateSignalFields(p, r)
  return c.ok ? 'ok' : c.code
}

// Compile-time: the interface and the published schema describe the same shape.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false
const schemaMatchesInterface: Same<SignalPayload, Type.Static<typeof SignalPayloadSchema>> = true

t.test('a complete signal is accepted with its emission time', async (t) => {
  const p = payload({ confidence: 87, note: 'whale cluster bought in' })
  t.same(validateSignalFields(p, rules), { ok: true, signal: p, emittedAtMs: NOW - 2_000 })
})

t.test('confidence and note are optional and absent from the result when absent', async (t) => {
  const r = validateSignalFields(payload(), rules)
  t.ok(r.ok)
  if (r.ok) t.same(Object.keys(r.signal).sort(), ['severity', 'signal_id', 'source_id', 'token', 'ts'])
})

t.test('a body that is not a plain object is refused with invalid_body', async (t) => {
  for (const v of [null, [], [payload()], 'x', 42, true, undefined, new Map(), Object.create(payload()), new (class Signal {})()]) {
    t.equal(codeOf(v), 'invalid_body', Object.prototype.toString.call(v))
  }
  t.equal(codeOf(Object.assign(Object.create(null), payload())), 'ok', 'a null-prototype object is plain')
})

t.test('an unknown field is refused with invalid_body naming the field', async (t) => {
  for (const field of ['test', 'Signal_id', 'extra', 'signal_id ', 'received_at']) {
    const r = validateSignalFields(payload({ [field]: 1 }), rules)
    t.match(r, { ok: false, code: 'invalid_body', message: new RegExp(`unknown field ${JSON.stringify(field)}`) }, field)
  }
})

t.test('an unknown field is reported before any other problem', async (t) => {
  t.equal(codeOf({ source_id: 'wrong', extra: 1 }), 'invalid_body')
})

t.test('a long unknown field name is quoted in at most 64 characters', async (t) => {
  const field = 'x'.repeat(1000)
  const r = validateSignalFields(payload({ [field]: 1 }), rules)
  t.match(r, { ok: false, message: /^unknown field "x{64}"…$/ })
})

t.test('a source_id that differs from the URL is refused with invalid_source_id', async (t) => {
  t.equal(codeOf(payload({ source_id: 'src_other_01' })), 'invalid_source_id')
  t.equal(codeOf(payload({ source_id: 'SRC_TEST_01' })), 'invalid_source_id', 'case matters')
  t.equal(codeOf(payload({ source_id: undefined })), 'invalid_source_id', 'missing')
  t.equal(codeOf(payload({ source_id: 1 })), 'invalid_source_id', 'not a string')
})

t.test('a signal_id of 7 characters is refused with invalid_signal_id', async (t) => {
  t.equal(codeOf(payload({ signal_id: 'a'.repeat(7) })), 'invalid_signal_id')
})

t.test('signal_ids of 8 and 128 characters are accepted', async (t) => {
  t.equal(codeOf(payload({ signal_id: 'a'.repeat(8) })), 'ok')
  t.equal(codeOf(payload({ signal_id: 'aZ09_:-'.repeat(18).slice(0, 128) })), 'ok')
})

t.test('a signal_id of 129 characters is refused with invalid_signal_id', async (t) => {
  t.equal(codeOf(payload({ signal_id: 'a'.repeat(129) })), 'invalid_signal_id')
})

t.test('a signal_id with a character outside letters, digits, _, -, : is refused with invalid_signal_id', async (t) => {
  for (const id of ['sig 00000001', 'sig.00000001', 'sig/00000001', 'sig_0000000é', 'sig_000000\n1', 'sig_00000001\n']) {
    t.equal(codeOf(payload({ signal_id: id })), 'invalid_signal_id', JSON.stringify(id))
  }
  t.equal(codeOf(payload({ signal_id: undefined })), 'invalid_signal_id', 'missing')
  t.equal(codeOf(payload({ signal_id: 12345678 })), 'invalid_signal_id', 'a number')
})

t.test('a ts that is not an ISO 8601 UTC timestamp is refused with invalid_timestamp', async (t) => {
  for (const ts of ['2025-06-15T14:00:00+02:00', '2025-06-15 12:00:00Z', '2025-06-15T12:00Z', NOW, null, undefined]) {
    t.equal(codeOf(payload({ ts })), 'invalid_timestamp', String(ts))
  }
})

t.test('a ts 300 seconds either side of the request timestamp is accepted', async (t) => {
  t.equal(codeOf(payload({ ts: iso(NOW - 300_000) })), 'ok')
  t.equal(codeOf(payload({ ts: iso(NOW + 300_000) })), 'ok')
  t.equal(codeOf(payload({ ts: iso(NOW).replace('Z', '+00:00') })), 'ok')
})

t.test('a ts 301 seconds either side of the request timestamp is refused with invalid_timestamp', async (t) => {
  t.equal(codeOf(payload({ ts: iso(NOW - 301_000) })), 'invalid_timestamp')
  t.equal(codeOf(payload({ ts: iso(NOW + 301_000) })), 'invalid_timestamp')
  t.equal(codeOf(payload({ ts: iso(NOW + 300_001) })), 'invalid_timestamp', 'one millisecond over')
})

t.test('the 300 s between ts and the request timestamp are counted to the nanosecond, not to the millisecond', async (t) => {
  const header = '2025-06-15T12:00:00.414Z'
  const at = { ...rules, requestTimeMs: Date.parse(header), requestTimestamp: header }
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.414Z' }), at), 'ok', 'exactly 300 s later')
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.414000000Z' }), at), 'ok', 'exactly 300 s, written to the nanosecond')
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.414999Z' }), at), 'invalid_timestamp', '300.000999 s later')
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.414000001Z' }), at), 'invalid_timestamp', '300.000000001 s later')
  t.equal(codeOf(payload({ ts: '2025-06-15T11:55:00.413999999Z' }), at), 'invalid_timestamp', '300.000000001 s earlier')
  t.equal(codeOf(payload({ ts: '2025-06-15T11:55:00.414Z' }), at), 'ok', 'exactly 300 s earlier')
  const fine = '2025-06-15T12:00:00.414500Z'
  const atFine = { ...rules, requestTimeMs: Date.parse(fine), requestTimestamp: fine }
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.4145Z' }), atFine), 'ok', 'both past the millisecond, exactly 300 s apart')
  t.equal(codeOf(payload({ ts: '2025-06-15T12:05:00.414501Z' }), atFine), 'invalid_timestamp')
  t.equal(codeOf(payload({ ts: '2025-06-15T11:55:00.4144Z' }), atFine), 'invalid_timestamp', '300.0001 s earlier')
})

t.test('a token that is not an address on any declared chain is refused with invalid_token', async (t) => {
  t.equal(codeOf(payload({ token: 'not-an-address' })), 'invalid_token')
  t.equal(codeOf(payload({ token: undefined })), 'invalid_token', 'missing')
  t.equal(codeOf(payload({ token: EVM_TOKEN.replace('a', 'A') })), 'invalid_token', 'bad EIP-55 checksum')
  t.equal(codeOf(payload({ token: EVM_TOKEN }), { ...rules, chains: ['solana'] }), 'invalid_token', 'EVM address, Solana-only source')
  t.equal(codeOf(payload({ token: SOL_MINT }), { ...rules, chains: ['base'] }), 'invalid_token', 'Solana mint, Base-only source')
  t.equal(codeOf(payload(), { ...rules, chains: [] }), 'invalid_token', 'no declared chains')
  t.equal(codeOf(payload(), { ...rules, chains: ['bitcoin'] }), 'invalid_token', 'an unsupported chain')
})

t.test('a token valid on any one of the declared chains is accepted', async (t) => {
  t.equal(codeOf(payload({ token: SOL_MINT })), 'ok')
  t.equal(codeOf(payload({ token: EVM_TOKEN })), 'ok')
  t.equal(codeOf(payload({ token: EVM_TOKEN.toLowerCase() })), 'ok')
})

t.test("a severity outside the manifest's levels is refused with invalid_severity", async (t) => {
  for (const severity of ['critical', 'High', '', 3, null, undefined]) {
    t.equal(codeOf(payload({ severity })), 'invalid_severity', String(severity))
  }
})

t.test('a confidence of 101 is refused with invalid_confidence', async (t) => {
  t.equal(codeOf(payload({ confidence: 101 })), 'invalid_confidence')
})

t.test('a confidence that is not an integer from 0 to 100 is refused with invalid_confidence', async (t) => {
  for (const confidence of [-1, 50.5, '50', true, null, Number.NaN, Number.POSITIVE_INFINITY, 1e21, [50], { v: 50 }]) {
    t.equal(codeOf(payload({ confidence })), 'invalid_confidence', String(confidence))
  }
})

t.test('confidences of 0, 100 and JSON 50.0 are accepted', async (t) => {
  t.equal(codeOf(payload({ confidence: 0 })), 'ok')
  t.equal(codeOf(payload({ confidence: 100 })), 'ok')
  const fromJson = JSON.parse('{"confidence":50.0}') as { confidence: number }
  t.equal(codeOf(payload(fromJson)), 'ok')
  t.equal(codeOf(payload(JSON.parse('{"confidence":1e2}') as Record<string, unknown>)), 'ok')
})

t.test('a note of 280 code points is accepted, also when they are emoji', async (t) => {
  t.equal(codeOf(payload({ note: 'a'.repeat(280) })), 'ok')
  t.equal(codeOf(payload({ note: '😀'.repeat(280) })), 'ok', '560 UTF-16 units')
  t.equal(codeOf(payload({ note: `${'😀'.repeat(140)}${'a'.repeat(140)}` })), 'ok')
  t.equal(codeOf(payload({ note: '' })), 'ok')
})

t.test('a note of 281 code points is refused with invalid_note', async (t) => {
  t.equal(codeOf(payload({ note: 'a'.repeat(281) })), 'invalid_note')
  t.equal(codeOf(payload({ note: '😀'.repeat(281) })), 'invalid_note')
  t.equal(codeOf(payload({ note: `${'😀'.repeat(280)}a` })), 'invalid_note')
  t.equal(codeOf(payload({ note: 'a'.repeat(10_000) })), 'invalid_note')
})

t.test('a note that is not a string is refused with invalid_note', async (t) => {
  for (const note of [null, 42, ['a'], { text: 'a' }]) t.equal(codeOf(payload({ note })), 'invalid_note', String(note))
})

t.test('checks run in the documented order', async (t) => {
  const allBad: Record<string, unknown> = {
    source_id: 'wrong',
    signal_id: 'short',
    ts: 'yesterday',
    token: 'nope',
    severity: 'nope',
    confidence: 101,
    note: 'n'.repeat(281),
  }
  const fixes: [string, unknown][] = [
    ['source_id', rules.sourceId],
    ['signal_id', 'sig_00000001'],
    ['ts', iso(NOW)],
    ['token', SOL_MINT],
    ['severity', 'low'],
    ['confidence', 1],
    ['note', 'ok'],
  ]
  const expected = ['invalid_source_id', 'invalid_signal_id', 'invalid_timestamp', 'invalid_token', 'invalid_severity', 'invalid_confidence', 'invalid_note', 'ok']
  const seen = [codeOf(allBad)]
  for (const [field, good] of fixes) {
    allBad[field] = good
    seen.push(codeOf(allBad))
  }
  t.same(seen, expected)
})

t.test('the result carries only the seven fields, with source_id from the rules', async (t) => {
  const r = validateSignalFields(payload({ confidence: 5, note: 'x' }), rules)
  t.ok(r.ok)
  if (r.ok) t.equal(Object.keys(r.signal).length, 7)
})

t.test('property: signal_id is valid exactly when it is 8 to 128 characters of the allowed set', async (t) => {
  const allowed = /^[A-Za-z0-9_:-]$/
  const idChar = fc.constantFrom(...'abcXYZ019_:-'.split(''), ' ', '.', 'é', '\n', '/')
  fc.assert(
    fc.property(fc.oneof(fc.string({ unit: idChar, maxLength: 140 }), fc.string({ maxLength: 140 })), (id) => {
      const expected = id.length >= 8 && id.length <= 128 && [...id].every((c) => allowed.test(c))
      const accepted = codeOf(payload({ signal_id: id })) === 'ok'
      return isValidSignalId(id) === expected && accepted === expected
    }),
    { numRuns: 2000 },
  )
  t.pass()
})

t.test('property: confidence is accepted exactly when it is an integer from 0 to 100', async (t) => {
  fc.assert(
    fc.property(fc.oneof(fc.integer({ min: -1000, max: 1000 }), fc.double(), fc.anything()), (confidence) => {
      // payload() drops undefined fields, and JSON has no undefined.
      fc.pre(confidence !== undefined)
      const expected = typeof confidence === 'number' && Number.isInteger(confidence) && confidence >= 0 && confidence <= 100
      return (codeOf(payload({ confidence })) === 'ok') === expected
    }),
    { numRuns: 2000 },
  )
  t.pass()
})

t.test('property: an error message never quotes more than 64 characters of the input', async (t) => {
  const longText = fc.string({ minLength: 65, maxLength: 300 })
  fc.assert(
    fc.property(longText, fc.constantFrom('field', 'source_id', 'signal_id', 'ts', 'token', 'severity', 'note'), (text, where) => {
      const p = where === 'field' ? payload({ [text]: 1 }) : payload({ [where]: text })
      const r = validateSignalFields(p, rules)
      if (r.ok) return true
      // Input is echoed only inside JSON string literals: decode each and measure it.
      for (const [literal] of r.message.matchAll(/"(?:[^"\\]|\\.)*"/g)) if ((JSON.parse(literal) as string).length > 64) return false
      // 64 quoted units may grow sixfold when JSON-escaped (\u0001), and no further.
      return r.message.length <= 100 + JSON.stringify(text.slice(0, 64)).length
    }),
  )
  t.pass()
})

t.test('the TypeBox schema agrees with the validator on shape', async (t) => {
  t.equal(schemaMatchesInterface, true)
  // TypeBox's static types leave schema options untyped; read them as the JSON Schema they are.
  const json = SignalPayloadSchema as unknown as { additionalProperties: unknown; properties: { signal_id: { pattern: unknown } } }
  t.equal(json.properties.signal_id.pattern, SIGNAL_ID_PATTERN.source)
  t.equal(json.additionalProperties, false)
  const good = payload({ confidence: 100, note: '😀'.repeat(280), token: EVM_TOKEN })
  t.equal(codeOf(good), 'ok')
  t.equal(Value.Check(SignalPayloadSchema, good), true)
  t.equal(Value.Check(SignalPayloadSchema, payload({ extra: 1 })), false)
  t.equal(Value.Check(SignalPayloadSchema, payload({ confidence: 50.5 })), false)
  t.equal(Value.Check(SignalPayloadSchema, payload({ signal_id: 'short' })), false)
  t.equal(Value.Check(SignalPayloadSchema, payload({ ts: '2025-06-15T12:00:00+01:00' })), false)
})

t.test('property: a note is accepted exactly when it is a string of at most 280 code points', async (t) => {
  const unit = fc.constantFrom('a', 'é', '🚀', '中', ' ', '\n')
  fc.assert(
    fc.property(fc.oneof(fc.string({ unit, maxLength: 300 }), fc.integer(), fc.boolean(), fc.constant(null)), (note) => {
      const expected = typeof note === 'string' && [...note].length <= 280
      return (codeOf(payload({ note })) === 'ok') === expected
    }),
    { numRuns: 1000 },
  )
  t.pass()
})

t.test('property: ts is accepted exactly when it is within 300 s of the request timestamp, either way', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: -400_000, max: 400_000 }), (offset) => {
      const expected = Math.abs(offset) <= 300_000
      return (codeOf(payload({ ts: iso(NOW + offset) })) === 'ok') === expected
    }),
    { numRuns: 1000 },
  )
  t.pass()
})
