import fc from 'fast-check'
import t from 'tap'
import { parseIsoUtc } from '../../pipeline/validate/iso-timestamp.js'

const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999)
const anyMs = fc.integer({ min: 0, max: MAX_MS })

t.test('the epoch and the last representable instant are accepted', async (t) => {
  t.equal(parseIsoUtc('1970-01-01T00:00:00Z'), 0)
  t.equal(parseIsoUtc('1970-01-01T00:00:00+00:00'), 0)
  t.equal(parseIsoUtc('9999-12-31T23:59:59.999999999Z'), MAX_MS)
})

t.test('fractions of 1 to 9 digits are truncated to milliseconds', async (t) => {
  const base = Date.UTC(2025, 5, 15, 12, 34, 56)
  t.equal(parseIsoUtc('2025-06-15T12:34:56.7Z'), base + 700)
  t.equal(parseIsoUtc('2025-06-15T12:34:56.78Z'), base + 780)
  t.equal(parseIsoUtc('2025-06-15T12:34:56.789Z'), base + 789)
  t.equal(parseIsoUtc('2025-06-15T12:34:56.789999999Z'), base + 789, 'never rounded up')
  t.equal(parseIsoUtc('2025-06-15T12:34:56.999999999+00:00'), base + 999)
  t.equal(parseIsoUtc('2025-06-15T12:34:56.0000000000Z'), undefined, '10 digits')
  t.equal(parseIsoUtc('2025-06-15T12:34:56.Z'), undefined, 'empty fraction')
  t.equal(parseIsoUtc('2025-06-15T12:34:56,5Z'), undefined, 'comma fraction')
})

t.test('leap years follow the Gregorian rule', async (t) => {
  t.equal(parseIsoUtc('2024-02-29T00:00:00Z'), Date.UTC(2024, 1, 29))
  t.equal(parseIsoUtc('2000-02-29T00:00:00Z'), Date.UTC(2000, 1, 29))
  t.equal(parseIsoUtc('2023-02-29T00:00:00Z'), undefined)
  t.equal(parseIsoUtc('2100-02-29T00:00:00Z'), undefined)
  t.equal(parseIsoUtc('2024-02-30T00:00:00Z'), undefined, 'Feb 30')
  t.equal(parseIsoUtc('2025-04-31T00:00:00Z'), undefined, 'Apr 31')
})

t.test('other forms of ISO 8601 and RFC 3339 are refused', async (t) => {
  const refused = [
    '2025-06-15t12:34:56Z', '2025-06-15T12:34:56z', '2025-06-15 12:34:56Z', '2025-06-15T12:34:56',
    '2025-06-15T12:34Z', '2025-06-15T12:34:60Z', '2025-06-15T24:00:00Z', '2025-06-15T12:60:00Z',
    '2025-13-01T00:00:00Z', '2025-00-01T00:00:00Z', '2025-06-00T00:00:00Z', '2025-06-31T00:00:00Z',
    '2025-06-15T12:34:56+01:00', '2025-06-15T12:34:56-00:00', '2025-06-15T12:34:56+0000',
    '2025-06-15T12:34:56+00', '2025-06-15T12:34:56Z+00:00', '20250615T123456Z', '+012025-06-15T12:34:56Z',
    '1969-12-31T23:59:59Z', '0000-01-01T00:00:00Z', ' 2025-06-15T12:34:56Z', '2025-06-15T12:34:56Z ',
    '2025-6-15T12:34:56Z', '2025-06-15T1:34:56Z', '２０２５-06-15T12:34:56Z', '2025-06-15T12:34:56.123456789Z'.padEnd(41, '0'),
    '', 'Z', '1750000000000', 'Sun, 15 Jun 2025 12:34:56 GMT',
  ]
  for (const s of refused) t.equal(parseIsoUtc(s), undefined, JSON.stringify(s))
})

t.test('property: toISOString output round-trips for any instant 1970..9999', async (t) => {
  fc.assert(fc.property(anyMs, (ms) => parseIsoUtc(new Date(ms).toISOString()) === ms))
  fc.assert(fc.property(anyMs, (ms) => parseIsoUtc(new Date(ms).toISOString().replace('Z', '+00:00')) === ms))
  t.pass()
})

t.test('property: any fraction length 1..9 parses to the truncated millisecond', async (t) => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: Math.floor(MAX_MS / 1000) }), fc.stringMatching(/^[0-9]{1,9}$/), (sec, frac) => {
      const whole = new Date(sec * 1000).toISOString().slice(0, 19)
      const ms = Number(frac.slice(0, 3).padEnd(3, '0'))
      return parseIsoUtc(`${whole}.${frac}Z`) === sec * 1000 + ms
    }),
  )
  t.pass()
})

/** Each turns a valid `…Z` timestamp from toISOString into one that must be refused. */
const mutations: [string, (iso: string) => string][] = [
  ['lowercase t', (s) => s.replace('T', 't')],
  ['lowercase z', (s) => s.replace('Z', 'z')],
  ['space for T', (s) => s.replace('T', ' ')],
  ['no zone', (s) => s.slice(0, -1)],
  ['offset +01:00', (s) => s.replace('Z', '+01:00')],
  ['offset -00:00', (s) => s.replace('Z', '-00:00')],
  ['offset +0000', (s) => s.replace('Z', '+0000')],
  ['no seconds', (s) => `${s.slice(0, 16)}Z`],
  ['leap second', (s) => `${s.slice(0, 17)}60${s.slice(19)}`],
  ['hour 24', (s) => `${s.slice(0, 11)}24${s.slice(13)}`],
  ['minute 60', (s) => `${s.slice(0, 14)}60${s.slice(16)}`],
  ['month 13', (s) => `${s.slice(0, 5)}13${s.slice(7)}`],
  ['month 00', (s) => `${s.slice(0, 5)}00${s.slice(7)}`],
  ['day 00', (s) => `${s.slice(0, 8)}00${s.slice(10)}`],
  ['day 32', (s) => `${s.slice(0, 8)}32${s.slice(10)}`],
  ['ten fraction digits', (s) => s.replace('Z', '0000000Z')],
  ['empty fraction', (s) => `${s.slice(0, 19)}.Z`],
  ['year 1969', (s) => `1969${s.slice(4)}`],
  ['leading space', (s) => ` ${s}`],
  ['trailing newline', (s) => `${s}\n`],
  ['dropped dash', (s) => s.slice(0, 4) + s.slice(5)],
]

t.test('property: each mutation of a valid timestamp is refused', async (t) => {
  fc.assert(
    fc.property(anyMs, fc.constantFrom(...mutations), (ms, [, mutate]) => {
      return parseIsoUtc(mutate(new Date(ms).toISOString())) === undefined
    }),
    { numRuns: 2000 },
  )
  t.pass()
})

t.test('property: arbitrary strings never throw', async (t) => {
  fc.assert(fc.property(fc.string({ maxLength: 45 }), (s) => {
    const r = parseIsoUtc(s)
    return r === undefined || Number.isInteger(r)
  }))
  t.pass()
})
