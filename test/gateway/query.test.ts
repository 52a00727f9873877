import fc from 'fast-check'
import t from 'tap'
import { param, parseQuery, withDefault } from '../../gateway/http/query.js'
import { newId } from '../../registry/index.js'

/**
 * The one parser of query strings (parseQuery and its rules), without a server: every
 * list endpoint reads its query through it, so these are the rules of all of them.
 */

const PAGE = { default: 50, max: 200 } as const
const RULES = { source_id: param.sourceId, creator_id: param.clientId, state: param.oneOf(['live', 'retired'] as const), limit: param.limit(PAGE), cursor: param.cursor }
const parse = (text: string) => parseQuery(new URLSearchParams(text), RULES)
/** The refusal `text` gets: its code and message. */
function refusal(text: string): { code: string; message: string } | undefined {
  try {
    parse(text)
    return undefined
  } catch (err) {
    return { code: (err as { code: string }).code, message: (err as Error).message }
  }
}

const names = Object.keys(RULES)
const CLIENT_ID_CHARS = 'ABCXYZabcxyz0189_:.-'
const clientId = fc.string({ unit: fc.constantFrom(...CLIENT_ID_CHARS), minLength: 1, maxLength: 128 }).filter((s) => s !== '.' && s !== '..')
const goodValue: Record<string, fc.Arbitrary<string>> = {
  source_id: fc.constant(null).map(() => newId('src')),
  creator_id: clientId,
  state: fc.constantFrom('live', 'retired'),
  limit: fc.integer({ min: 1, max: PAGE.max }).map(String),
  cursor: fc.string({ unit: fc.constantFrom(...CLIENT_ID_CHARS), minLength: 1, maxLength: 256 }),
}
/** A query of distinct known parameters, each with a good value, in any order. */
const goodQuery = fc.shuffledSubarray(names).chain((chosen) => fc.tuple(...chosen.map((n) => goodValue[n]!.map((v) => [n, v] as [string, string]))))

t.test('nothing given: every filter undefined, the limit its default', async (t) => {
  t.same(parse(''), { source_id: undefined, creator_id: undefined, state: undefined, limit: 50, cursor: undefined })
})

t.test('any query of known parameters with good values, in any order and however encoded, reads back as given', async (t) => {
  fc.assert(
    fc.property(goodQuery, (pairs) => {
      const read: Record<string, unknown> = parse(new URLSearchParams(pairs).toString())
      for (const [name, value] of pairs) if (read[name] !== (name === 'limit' ? Number(value) : value)) return false
      return read.limit === (pairs.some(([n]) => n === 'limit') ? read.limit : PAGE.default)
    }),
  )
})

t.test('a parameter given more than once is 400 naming it, whatever the values and wherever the repeat stands', async (t) => {
  fc.assert(
    fc.property(goodQuery.filter((p) => p.length > 0), fc.nat(), fc.string({ maxLength: 8 }), (pairs, pick, second) => {
      const [name] = pairs[pick % pairs.length]!
      const query = new URLSearchParams([...pairs, [name, second]]).toString()
      const got = refusal(query)
      return got?.code === 'invalid_request' && got.message === `query parameter ${name} is given more than once`
    }),
  )
  t.match(refusal('limit=5&lim%69t=5'), { message: 'query parameter limit is given more than once' }, 'decoded names are compared: the same value twice is still twice')
})

t.test('a parameter the endpoint does not take is 400 naming it and listing those it takes', async (t) => {
  fc.assert(
    fc.property(goodQuery, fc.string({ minLength: 1, maxLength: 80 }).filter((n) => !names.includes(n)), (pairs, unknown) => {
      const got = refusal(new URLSearchParams([...pairs, [unknown, 'x']]).toString())
      return got?.code === 'invalid_request' && got.message.startsWith(`unknown query parameter ${JSON.stringify(unknown.length <= 64 ? unknown : `${unknown.slice(0, 64)}…`)}; this endpoint takes source_id, creator_id, state, limit, cursor`)
    }),
  )
  t.match(refusal('x'.repeat(5000)), { message: /^unknown query parameter "x{64}…"/ }, 'a long name is clipped in the message')
  t.throws(() => parseQuery(new URLSearchParams('a=1'), {}), { code: 'invalid_request', message: 'unknown query parameter "a"; this endpoint takes none' })
  t.same(parseQuery(new URLSearchParams(''), {}), {}, 'an endpoint that takes none takes an empty query')
})

t.test('a malformed id is 400 naming the parameter; an empty value counts as given', async (t) => {
  for (const [query, name] of [
    ['source_id=', 'source_id'], ['source_id=src_short', 'source_id'], [`source_id=${newId('src')}x`, 'source_id'], [`source_id=${newId('rnt')}`, 'source_id'],
    ['source_id=src_%20%20%20%20%20%20%20%20%20%20%20%20%20%20%20%20', 'source_id'], ['creator_id=', 'creator_id'], ['creator_id=a%20b', 'creator_id'],
    ['creator_id=..', 'creator_id'], ['creator_id=.', 'creator_id'], [`creator_id=${'x'.repeat(129)}`, 'creator_id'], ['creator_id=a%0A', 'creator_id'], ['creator_id=%C3%A9', 'creator_id'],
  ] as const) {
    const got = refusal(query)
    t.equal(got?.code, 'invalid_request', query)
    t.match(got?.message, new RegExp(`^${name} must be `), `${query} names ${name}`)
  }
  fc.assert(
    fc.property(fc.string({ maxLength: 140 }), (value) => {
      const got = refusal(new URLSearchParams([['creator_id', value]]).toString())
      const valid = /^[A-Za-z0-9_:.-]{1,128}$/.test(value) && value !== '.' && value !== '..'
      return valid ? got === undefined : got?.message.startsWith('creator_id must be ') === true
    }),
  )
})

t.test('every id the registry issues for a source is read as a source id, and ids of other kinds are not', async (t) => {
  const issued = Array.from({ length: 2000 }, () => newId('src'))
  t.same(issued.filter((id) => parse(`source_id=${id}`).source_id !== id), [], '2,000 issued source ids, all read')
  for (const kind of ['rnt', 'tok', 'key', 'dsp']) t.match(refusal(`source_id=${newId(kind)}`), { code: 'invalid_request' }, kind)
})

t.test('limit: digits only, 1 to the endpoint\'s max', async (t) => {
  fc.assert(
    fc.property(fc.string({ maxLength: 6 }), (value) => {
      const got = refusal(new URLSearchParams([['limit', value]]).toString())
      const n = Number(value)
      const valid = /^[0-9]{1,4}$/.test(value) && n >= 1 && n <= PAGE.max
      return valid ? parse(`limit=${value}`).limit === n : got?.message === 'limit must be an integer from 1 to 200'
    }),
  )
  for (const value of ['0', '201', '1e2', '0x10', '+5', '-1', ' 5', '5 ', '', '12345', '5.0']) t.ok(refusal(`limit=${encodeURIComponent(value)}`), JSON.stringify(value))
  t.equal(parse('limit=0007').limit, 7, 'leading zeros are digits')
})

t.test('cursor: 1 to 256 of A-Z a-z 0-9 _ : . -, else the one bad-cursor refusal', async (t) => {
  for (const value of ['', '%', 'a b', 'a/b', 'x'.repeat(257), 'é']) {
    t.same(refusal(new URLSearchParams([['cursor', value]]).toString()), { code: 'invalid_request', message: 'cursor is not valid: it is not one this endpoint returned' }, JSON.stringify(value))
  }
  t.equal(parse(`cursor=${'x'.repeat(256)}`).cursor?.length, 256)
})

t.test('one of a set, a flag, a time and a default', async (t) => {
  t.throws(() => parse('state=dead'), { message: 'state must be live or retired' })
  const three = param.oneOf(['a', 'b', 'c'] as const)
  t.throws(() => three('d', 'x'), { message: 'x must be a, b or c' })
  t.equal(param.flag(undefined, 'f'), false)
  t.equal(param.flag('true', 'f'), true)
  t.equal(param.flag('false', 'f'), false)
  t.throws(() => param.flag('1', 'f'), { code: 'invalid_request', message: 'f must be true or false' })
  t.equal(param.instant('2030-01-31T12:00:00Z', 'from'), Date.UTC(2030, 0, 31, 12))
  t.throws(() => param.instant('yesterday', 'from'), { message: /^from must be an ISO 8601 UTC time/ })
  const format = withDefault(param.oneOf(['ndjson', 'csv'] as const), 'ndjson')
  t.equal(format(undefined, 'format'), 'ndjson')
  t.equal(format('csv', 'format'), 'csv')
  t.equal(param.given('anything at all', 'after'), 'anything at all', 'given: left to the endpoint')
})

t.test('the first problem in the rules\' order is the one named, after unknown and repeated names', async (t) => {
  t.match(refusal('limit=0&source_id=x'), { message: /^source_id/ })
  t.match(refusal('limit=0&source_id=x&nope=1'), { message: /^unknown query parameter "nope"/ })
  t.match(refusal('limit=0&limit=0&source_id=x'), { message: /limit is given more than once/ })
})
