import fc from 'fast-check'
import t from 'tap'
import { MAX_DEPTH, MAX_SIGNIFICANT_DIGITS, parseStrictJson } from '../../pipeline/validate/strict-json.js'

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s)
const parse = (s: string) => parseStrictJson(utf8(s))
/** The refusal reason, or 'ok'. */
const verdict = (s: string): string => {
  const r = parse(s)
  return r.ok ? 'ok' : r.reason
}

function hasProtoKey(v: unknown): boolean {
  if (Array.isArray(v)) return v.some(hasProtoKey)
  if (typeof v !== 'object' || v === null) return false
  return Object.keys(v).some((k) => k === '__proto__' || hasProtoKey((v as Record<string, unknown>)[k]))
}

/** Significant digits of a numeral: from its first to its last digit other than 0, exponent aside. */
function significantDigits(numeral: string): number {
  const digits = numeral.replace(/[eE].*$/, '').replace(/[^0-9]/g, '').replace(/^0+/, '').replace(/0+$/, '')
  return digits.length
}

/** A number anywhere in `v` that JSON.stringify writes with more digits than a double holds, or that is subnormal. */
function hasInexactNumber(v: unknown): boolean {
  if (typeof v === 'number') return v !== 0 && (Math.abs(v) < 2.2250738585072014e-308 || significantDigits(JSON.stringify(v)) > MAX_SIGNIFICANT_DIGITS)
  if (Array.isArray(v)) return v.some(hasInexactNumber)
  if (typeof v !== 'object' || v === null) return false
  return Object.values(v).some(hasInexactNumber)
}

/** A lone surrogate anywhere: in a `u` regex a paired surrogate is one code point, not a Cs match. */
const hasLoneSurrogate = (s: string): boolean => /\p{Cs}/u.test(s)

/** `key` as a JSON string literal, each code point written raw or as \u escapes as `escapeMask` says. */
function spell(key: string, escapeMask: number): string {
  let out = '"'
  let bit = 0
  for (const cp of key) {
    if ((escapeMask >> bit++ % 31) & 1) {
      for (let u = 0; u < cp.length; u++) out += `\\u${cp.charCodeAt(u).toString(16).padStart(4, '0')}`
    } else {
      out += JSON.stringify(cp).slice(1, -1)
    }
  }
  return `${out}"`
}

t.test('a plain signal body is parsed', async (t) => {
  const body = '{"signal_id":"sig_0001","source_id":"src_1","ts":"2025-01-01T00:00:00Z","token":"x","severity":"high","confidence":50}'
  t.same(parse(body), { ok: true, value: JSON.parse(body) })
})

t.test('invalid UTF-8 is refused', async (t) => {
  const cases: [string, number[]][] = [
    ['a lone continuation byte', [0x22, 0x80, 0x22]],
    ['an overlong slash', [0x22, 0xc0, 0xaf, 0x22]],
    ['a UTF-8 encoded surrogate (CESU-8)', [0x22, 0xed, 0xa0, 0x80, 0x22]],
    ['a truncated 3-byte sequence', [0x22, 0xe2, 0x82, 0x22]],
    ['a code point above U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
    ['byte 0xff', [0x7b, 0xff, 0x7d]],
  ]
  for (const [name, bytes] of cases) {
    t.same(parseStrictJson(Uint8Array.from(bytes)), { ok: false, reason: 'it is not valid UTF-8' }, name)
  }
})

t.test('a byte order mark is refused', async (t) => {
  t.match(parseStrictJson(Uint8Array.from([0xef, 0xbb, 0xbf, ...utf8('{"a":1}')])), { ok: false, reason: /byte order mark/ })
  // U+FEFF later in a string is just a character.
  t.equal(verdict('{"a":"\ufeff"}'), 'ok')
})

t.test('syntax errors are refused without echoing the input', async (t) => {
  for (const body of ['', ' ', '{', '{"a":1,}', '[1,]', "{'a':1}", '{"a" 1}', 'nul', '01', '"\t"', '{"a":1}}', '{"a":"\\x"}', 'NaN']) {
    // The scanner may spot some first; either way the reason is a fixed phrase.
    t.match(verdict(body), /^(syntax error|unterminated string|unbalanced brackets)$/, JSON.stringify(body))
  }
})

t.test('duplicate keys are refused, also when spelt with escapes', async (t) => {
  t.match(verdict('{"a":1,"a":2}'), /duplicate key "a"/)
  t.match(verdict('{"a":1,"\\u0061":2}'), /duplicate key "a"/)
  t.match(verdict('{"\\u00e9":1,"é":2}'), /duplicate key/)
  t.match(verdict('{"😀":1,"\\ud83d\\ude00":2}'), /duplicate key/)
  t.match(verdict('{"a\\/b":1,"a/b":2}'), /duplicate key/)
  t.match(verdict('{"x":[{"a":1,"b":{"c":1,"c":2}}]}'), /duplicate key "c"/)
  t.match(verdict('{"a":{"z":1},"a":2}'), /duplicate key "a"/, 'after a nested object closes')
})

t.test('the same key in different objects is not a duplicate', async (t) => {
  t.equal(verdict('{"a":{"a":{"a":1}}}'), 'ok')
  t.equal(verdict('[{"a":1},{"a":2}]'), 'ok')
  t.equal(verdict('{"a":[{"a":1},{"a":2}],"b":{"a":3}}'), 'ok')
  t.equal(verdict('{"a":"a","b":"a"}'), 'ok', 'values are not keys')
  t.equal(verdict('["a","a"]'), 'ok')
})

t.test('duplicates are found in objects with many keys', async (t) => {
  const keys = Array.from({ length: 200 }, (_, i) => `"k${i}":${i}`)
  t.equal(verdict(`{${keys.join(',')}}`), 'ok')
  t.match(verdict(`{${keys.join(',')},"k0":1}`), /duplicate key "k0"/)
  t.match(verdict(`{${keys.join(',')},"k199":1}`), /duplicate key "k199"/)
  t.match(verdict(`{"k5":0,${keys.slice(0, 5).join(',')},"k5":1}`), /duplicate key "k5"/)
})

t.test('a long duplicate key is quoted in at most 64 characters', async (t) => {
  const key = 'k'.repeat(500)
  const reason = verdict(`{"${key}":1,"${key}":2}`)
  t.match(reason, /^duplicate key "k{64}…"$/)
})

t.test('lone surrogates in escapes are refused, pairs are accepted', async (t) => {
  t.match(verdict('"\\ud800"'), /lone high surrogate/)
  t.match(verdict('"\\udfff"'), /lone low surrogate/)
  t.match(verdict('"\\ud800x"'), /lone high surrogate/)
  t.match(verdict('"\\ud800\\u0041"'), /lone high surrogate/)
  t.match(verdict('"\\ud800\\ud800"'), /lone high surrogate/)
  t.match(verdict('"\\ude00\\ud83d"'), /lone low surrogate/, 'a reversed pair')
  t.match(verdict('{"\\ud800":1}'), /lone high surrogate/, 'in a key')
  t.match(verdict('"\\ud83d\\n"'), /lone high surrogate/)
  t.match(verdict('"\\ud83d'), /lone high surrogate|unterminated/, 'at the end of input')
  t.same(parse('"\\ud83d\\ude00"'), { ok: true, value: '😀' })
  t.same(parse('"\\uD83D\\uDE00"'), { ok: true, value: '😀' }, 'upper-case hex')
  t.same(parse('"😀"'), { ok: true, value: '😀' }, 'raw 4-byte UTF-8')
})

t.test(`nesting of ${MAX_DEPTH} containers is accepted and ${MAX_DEPTH + 1} refused`, async (t) => {
  const arrays = (d: number): string => '['.repeat(d) + ']'.repeat(d)
  const objects = (d: number): string => '{"a":'.repeat(d - 1) + '{}' + '}'.repeat(d - 1)
  t.equal(verdict(arrays(MAX_DEPTH)), 'ok')
  t.equal(verdict(objects(MAX_DEPTH)), 'ok')
  t.equal(verdict(arrays(MAX_DEPTH + 1)), `nesting deeper than ${MAX_DEPTH}`)
  t.equal(verdict(objects(MAX_DEPTH + 1)), `nesting deeper than ${MAX_DEPTH}`)
  t.equal(verdict('['.repeat(100_000)), `nesting deeper than ${MAX_DEPTH}`, 'refused before JSON.parse sees it')
  t.equal(verdict('[[],[],[[],[[]]]]'.repeat(1)), 'ok', 'siblings do not add depth')
})

t.test('a __proto__ key is refused, also when escaped; as a value it is fine', async (t) => {
  t.match(verdict('{"__proto__":{"admin":true}}'), /__proto__/)
  t.match(verdict('{"a":[{"__proto__":1}]}'), /__proto__/)
  t.match(verdict('{"\\u005f_proto__":1}'), /__proto__/)
  t.equal(verdict('{"a":"__proto__"}'), 'ok')
  t.equal(verdict('{"constructor":1,"prototype":2}'), 'ok')
})

t.test('keys of a refused body do not leak into the next parse', async (t) => {
  t.match(verdict('{"a":1,"b":2,"a":3}'), /duplicate/)
  t.equal(verdict('{"b":1,"a":2}'), 'ok')
  t.match(verdict('{"x":{"a":1,"a":'), /duplicate/)
  t.equal(verdict('{"x":{"a":1}}'), 'ok')
})

t.test('property: any JSON value round-trips exactly as JSON.parse reads it', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 8, stringUnit: 'grapheme' }), (v) => {
      const text = JSON.stringify(v)
      const r = parse(text)
      // fast-check sometimes generates a __proto__ key on purpose: that must be refused,
      // as must numbers a double does not hold to the digit (fast-check writes such doubles
      // too). A value with both is refused for whichever comes first in the text.
      const proto = hasProtoKey(v)
      const inexact = hasInexactNumber(v)
      if (proto || inexact) return !r.ok && ((proto && /__proto__/.test(r.reason)) || (inexact && /number/.test(r.reason)))
      t.same(r, { ok: true, value: JSON.parse(text) })
      return r.ok
    }),
    { numRuns: 1000 },
  )
})

t.test('numbers a double cannot hold to the digit are refused; exact ones in any spelling are read', async (t) => {
  for (const numeral of ['100.0000000000000001', '99.99999999999999999', '1234567890123456', '0.30000000000000004', '-1.7976931348623157e308']) {
    t.match(verdict(`{"confidence":${numeral}}`), /more than 15 significant digits/, numeral)
  }
  for (const numeral of ['1e400', '-1e400', '1e-400', '4e-320']) t.match(verdict(`{"confidence":${numeral}}`), /beyond the range of a double/, numeral)
  for (const [numeral, value] of [
    ['50.0', 50],
    ['5E1', 50],
    ['0.5e+2', 50],
    ['100.00000000000000000000', 100],
    ['0e999', 0],
    ['-0', -0],
    ['123456789012345', 123456789012345],
    ['0.000000000000001', 1e-15],
    ['1.5e308', 1.5e308],
  ] as const) {
    t.same(parse(`[${numeral}]`), { ok: true, value: [value] }, numeral)
  }
  t.equal(verdict('{"s":"100.0000000000000001","k":12345678901234567890e0}'), 'a number has more than 15 significant digits, more than a double holds exactly', 'a long numeral in a string is a string; outside it is judged')
  t.equal(verdict('{"c":01}'), 'syntax error', 'a malformed numeral is left to JSON.parse')
})

t.test('property: a numeral of up to 15 significant digits is read as its double; one of more is refused', async (t) => {
  fc.assert(
    fc.property(fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e300, max: 1e300 }), fc.integer({ min: 1, max: 21 }), (d, precision) => {
      fc.pre(d === 0 || Math.abs(d) >= 2.2250738585072014e-308)
      const numeral = d.toPrecision(precision)
      const r = parse(`[${numeral}]`)
      // Rounding can carry the smallest normal double below it ("-2e-308"): a subnormal numeral is refused.
      if (Number(numeral) !== 0 && Math.abs(Number(numeral)) < 2.2250738585072014e-308) return !r.ok
      if (significantDigits(numeral) > MAX_SIGNIFICANT_DIGITS) return !r.ok && /significant digits/.test(r.reason)
      return r.ok && Object.is((r.value as number[])[0], Number(numeral))
    }),
    { numRuns: 2000 },
  )
  t.pass()
})

t.test('property: pretty-printed JSON is parsed the same as compact JSON', async (t) => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
      fc.pre(!hasProtoKey(v) && !hasInexactNumber(v))
      const r = parse(JSON.stringify(v, null, '\t'))
      return r.ok && JSON.stringify(r.value) === JSON.stringify(v)
    }),
  )
  t.pass()
})

t.test('property: a string is refused exactly when it holds a lone surrogate', async (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 20 }), (s) => {
      // JSON.stringify writes lone surrogates as \uXXXX escapes.
      return parse(JSON.stringify({ note: s })).ok === !hasLoneSurrogate(s)
    }),
    { numRuns: 2000 },
  )
  t.pass()
})

t.test('property: injecting a duplicate key, however spelt, is always refused', async (t) => {
  fc.assert(
    fc.property(
      fc.string({ unit: 'grapheme', minLength: 0, maxLength: 8 }).filter((k) => k !== '__proto__'),
      fc.uniqueArray(fc.string({ maxLength: 6 }).filter((k) => k !== '__proto__'), { maxLength: 6 }),
      fc.nat(),
      fc.nat(),
      fc.jsonValue({ maxDepth: 2 }),
      fc.constantFrom('top', 'in-array', 'in-object'),
      (key, others, firstMask, secondMask, value, where) => {
        // A __proto__ or an inexact number inside the value would be refused first, for its own reason.
        fc.pre(!hasProtoKey(value) && !hasInexactNumber(value))
        const rest = others.filter((k) => k !== key).map((k) => `${JSON.stringify(k)}:0`)
        const cut = firstMask % (rest.length + 1)
        const members = [...rest.slice(0, cut), `${spell(key, firstMask)}:${JSON.stringify(value)}`, ...rest.slice(cut)]
        members.push(`${spell(key, secondMask)}:1`)
        const object = `{${members.join(',')}}`
        const body = where === 'top' ? object : where === 'in-array' ? `[1,${object}]` : `{"outer":${object}}`
        const r = parse(body)
        return !r.ok && r.reason.startsWith('duplicate key')
      },
    ),
    { numRuns: 1000 },
  )
  t.pass()
})

t.test('property: random bytes never throw', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      const r = parseStrictJson(bytes)
      return r.ok ? 'value' in r : typeof r.reason === 'string' && r.reason.length > 0
    }),
    { numRuns: 3000 },
  )
  t.pass()
})

t.test('property: JSON-like noise never throws and is accepted only when JSON.parse accepts it', async (t) => {
  const token = fc.constantFrom('{', '}', '[', ']', '"', ':', ',', '\\', '\\u', 'd800', 'dc00', '0061', 'a', '1', ' ', 'null', '__proto__', '😀')
  fc.assert(
    fc.property(fc.array(token, { maxLength: 40 }), (parts) => {
      const text = parts.join('')
      const r = parse(text)
      if (!r.ok) return r.reason.length > 0
      t.same(r.value, JSON.parse(text))
      return true
    }),
    { numRuns: 5000 },
  )
})
