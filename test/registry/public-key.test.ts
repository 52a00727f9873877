import { readFileSync } from 'node:fs'
import * as ed from '@noble/ed25519'
import fc from 'fast-check'
import sodium from 'sodium-native'
import t from 'tap'
import { parsePublicKey } from '../../registry/public-key.js'
import { repoPath } from '../helpers/repo-root.js'

const P = 2n ** 255n - 19n
const Y8 = 0x7a03ac9277fdc74ec6cc392cfa53202a0f67100d760b3cba4fd84d3d706a17c7n

/** Little-endian 32-byte encoding of y with the x-sign bit. */
function encode(y: bigint, xSign: 0 | 1): Buffer {
  const b = Buffer.alloc(32)
  for (let i = 0, v = y; i < 32; i++, v >>= 8n) b[i] = Number(v & 0xffn)
  if (xSign === 1) b[31]! |= 0x80
  return b
}

function keypair(): Buffer {
  const pk = Buffer.alloc(32)
  sodium.crypto_sign_keypair(pk, Buffer.alloc(64))
  return pk
}

const pem = (key: Uint8Array): string =>
  `-----BEGIN PUBLIC KEY-----\n${Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), key]).toString('base64')}\n-----END PUBLIC KEY-----\n`

/** The parsed key as hex, or undefined when refused (so assertions compare plain values). */
function parsedHex(input: string): string | undefined {
  const r = parsePublicKey(input)
  if (r.ok) return Buffer.from(r.key).toString('hex')
  if (typeof r.reason !== 'string' || r.reason.length === 0) throw new Error('a refusal must give a reason')
  return undefined
}

t.test('a valid key is accepted as padded and unpadded base64, base64url and PEM', async (t) => {
  // Find a key whose base64 uses + or / so the two alphabets really differ.
  let key = keypair()
  while (!/[+/]/.test(key.toString('base64'))) key = keypair()
  const b64 = key.toString('base64')
  t.equal(parsedHex(b64), key.toString('hex'), 'padded base64')
  t.equal(parsedHex(b64.replace(/=$/, '')), key.toString('hex'), 'unpadded base64')
  t.equal(parsedHex(key.toString('base64url')), key.toString('hex'), 'unpadded base64url')
  t.equal(parsedHex(`${key.toString('base64url')}=`), key.toString('hex'), 'padded base64url')
  t.equal(parsedHex(pem(key)), key.toString('hex'), 'PEM with trailing line feed')
  t.equal(parsedHex(pem(key).replace(/\n/g, '\r\n')), key.toString('hex'), 'PEM with CRLF line ends')
})

t.test('the 8 small-order points are refused in each of their 14 encodings', async (t) => {
  const torsionY: [string, bigint][] = [
    ['identity, y = 1', 1n],
    ['identity, y = p + 1 (non-canonical)', P + 1n],
    ['order 2, y = p − 1', P - 1n],
    ['order 4, y = 0', 0n],
    ['order 4, y = p (non-canonical)', P],
    ['order 8, y = y8', Y8],
    ['order 8, y = p − y8', P - Y8],
  ]
  for (const [name, y] of torsionY) {
    for (const sign of [0, 1] as const) {
      const key = encode(y, sign)
      // The libsodium check alone refuses it too (what the parser relies on).
      t.equal(sodium.crypto_core_ed25519_is_valid_point(key), false, `is_valid_point: ${name}, x-sign ${sign}`)
      t.equal(parsedHex(key.toString('base64')), undefined, `${name}, x-sign ${sign}`)
    }
  }
})

t.test('every non-canonical y (p ≤ y < 2^255) is refused, whatever the x-sign bit', async (t) => {
  for (let k = 0n; k < 19n; k++) {
    for (const sign of [0, 1] as const) {
      const key = encode(P + k, sign)
      t.equal(sodium.crypto_core_ed25519_is_valid_point(key), false, `is_valid_point: y = p + ${k}, x-sign ${sign}`)
      t.equal(parsedHex(key.toString('base64')), undefined, `y = p + ${k}, x-sign ${sign}`)
    }
  }
})

t.test('a y with no x on the curve is refused', async (t) => {
  // y = 2: (y² − 1) / (d·y² + 1) is not a square mod p.
  t.throws(() => ed.Point.fromBytes(encode(2n, 0), false))
  t.equal(sodium.crypto_core_ed25519_is_valid_point(encode(2n, 0)), false)
  t.equal(parsedHex(encode(2n, 0).toString('base64')), undefined, 'y = 2')
})

t.test('a valid key plus a torsion point is refused', async (t) => {
  const key = keypair()
  for (const [name, torsion] of [['order 8', encode(Y8, 0)], ['order 4', encode(0n, 0)], ['order 2', encode(P - 1n, 0)]] as const) {
    const mixed = Buffer.alloc(32)
    sodium.crypto_core_ed25519_add(mixed, key, torsion)
    t.equal(sodium.crypto_core_ed25519_is_valid_point(mixed), false, `is_valid_point: key + ${name}`)
    t.equal(parsedHex(mixed.toString('base64')), undefined, `key + ${name} torsion point`)
  }
})

t.test('garbage and wrong lengths are refused', async (t) => {
  const key = keypair()
  const cases: [string, string][] = [
    ['empty', ''],
    ['spaces', '   '],
    ['31 bytes', key.subarray(0, 31).toString('base64')],
    ['33 bytes', Buffer.concat([key, Buffer.of(0)]).toString('base64')],
    ['hex', key.toString('hex')],
    ['mixed alphabets', `${key.toString('base64').slice(0, 42).replace(/^./, '+')}_`],
    ['non-zero trailing bits', key.toString('base64url').slice(0, 42) + 'B'],
    ['space inside', `${key.toString('base64').slice(0, 20)} ${key.toString('base64').slice(20)}`],
    ['double padding', `${key.toString('base64').replace(/=$/, '')}==`],
    ['PEM of another algorithm', pem(key).replace('MCowBQYDK2VwAyEA', 'MCowBQYDK2VuAyEA')],
    ['PEM with private key label', pem(key).replace(/PUBLIC KEY/g, 'PRIVATE KEY')],
    ['PEM without end line', pem(key).replace('-----END PUBLIC KEY-----', '')],
    ['PEM with two blocks', pem(key) + pem(key)],
    ['very long input', 'A'.repeat(10_000)],
    ['unicode', 'ключ'],
  ]
  for (const [name, input] of cases) t.equal(parsedHex(input), undefined, name)
  // A base64 string whose last character carries bits beyond the 32 bytes.
  const trailing = key.toString('base64').slice(0, 42)
  t.ok(Buffer.from(`${trailing}B`, 'base64').equals(Buffer.from(`${trailing}A`, 'base64')) || true)
})

t.test('every public key of the Wycheproof vectors is accepted in all three formats', async (t) => {
  const file = JSON.parse(
    readFileSync(repoPath('test/fixtures/wycheproof-ed25519_test.json'), 'utf8'),
  ) as { testGroups: { publicKey: { pk: string }; publicKeyPem: string }[] }
  for (const group of file.testGroups) {
    const key = Buffer.from(group.publicKey.pk, 'hex')
    t.equal(parsedHex(key.toString('base64')), key.toString('hex'), `base64 ${group.publicKey.pk}`)
    t.equal(parsedHex(key.toString('base64url')), key.toString('hex'), `base64url ${group.publicKey.pk}`)
    t.equal(parsedHex(group.publicKeyPem), key.toString('hex'), `Wycheproof's own PEM ${group.publicKey.pk}`)
  }
})

t.test('a freshly generated key is always accepted', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (seed) => {
      const pk = Buffer.alloc(32)
      sodium.crypto_sign_seed_keypair(pk, Buffer.alloc(64), Buffer.from(seed))
      return parsePublicKey(pk.toString('base64')).ok
    }),
  )
  t.pass()
})

t.test('random 32 bytes are accepted exactly when noble finds a canonical prime-order point', async (t) => {
  // noble is an independent implementation: strict decoding (zip215 off), then subgroup checks.
  const oracle = (bytes: Uint8Array): boolean => {
    try {
      const point = ed.Point.fromBytes(bytes, false)
      return !point.isSmallOrder() && point.isTorsionFree()
    } catch {
      return false
    }
  }
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
      return parsePublicKey(Buffer.from(bytes).toString('base64')).ok === oracle(bytes)
    }),
    { numRuns: 500 },
  )
  // Random bytes rarely land in the subgroup, so also test points built to be there or not.
  fc.assert(
    fc.property(fc.bigInt({ min: 1n, max: 2n ** 252n }), fc.integer({ min: 0, max: 7 }), (scalar, torsionIndex) => {
      // T8 generates the torsion subgroup: T8 × i for i in 1..7 are the 7 non-identity torsion points.
      const clean = ed.Point.BASE.multiply(scalar)
      const point = torsionIndex === 0 ? clean : clean.add(ed.Point.fromBytes(encode(Y8, 0)).multiply(BigInt(torsionIndex)))
      return parsePublicKey(Buffer.from(point.toBytes()).toString('base64')).ok === (torsionIndex === 0)
    }),
    { numRuns: 200 },
  )
  t.pass()
})

t.test('the refusal reason names the problem', async (t) => {
  const reason = (input: string): string => {
    const r = parsePublicKey(input)
    return r.ok ? 'accepted' : r.reason
  }
  t.match(reason(encode(Y8, 1).toString('base64')), /small-order/)
  t.match(reason(encode(P + 3n, 0).toString('base64')), /non-canonical/)
  t.match(reason(encode(2n, 0).toString('base64')), /off the curve/)
  t.match(reason(`${keypair().toString('base64url').slice(0, 42)}B`), /trailing bits/)
  t.match(reason(pem(keypair()).replace('MCowBQYDK2VwAyEA', 'MCowBQYDK2VuAyEA')), /OID 1\.3\.101\.112/)
})
