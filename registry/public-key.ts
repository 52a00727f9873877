import sodium from 'sodium-native'

/**
 * Parses a public key submitted at registration, refusing small-order and non-canonical
 * keys. Accepted forms: base64 or base64url of the 32 raw key bytes, padded or not, or
 * a PEM `PUBLIC KEY` block holding an Ed25519 SubjectPublicKeyInfo (RFC 8410).
 *
 * Why so strict: a small-order key lets anyone forge signatures that some verifiers
 * accept for every message, and a key with several encodings, or with a torsion
 * component, can make two verifiers disagree about one signature. Honest keys
 * (seed → scalar × base point) are never affected.
 */
export type PublicKeyParse = { ok: true; key: Uint8Array } | { ok: false; reason: string }

const KEY_BYTES = 32
/** A PEM of an Ed25519 key is 113 characters; anything far longer is not one. */
const MAX_INPUT_CHARS = 512

/** SEQUENCE { SEQUENCE { OID 1.3.101.112 } BIT STRING (0 unused bits) } then the key. */
const ED25519_SPKI_PREFIX = Uint8Array.of(0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00)

const PEM_BLOCK = /^-----BEGIN PUBLIC KEY-----\r?\n((?:[A-Za-z0-9+/=]+\r?\n)+)-----END PUBLIC KEY-----$/
const RAW_BASE64 = /^[A-Za-z0-9+/]{43}=?$/
const RAW_BASE64URL = /^[A-Za-z0-9_-]{43}=?$/

/**
 * The y-coordinates (little-endian, sign bit cleared) of the 8 torsion points:
 * identity (y = 1), order 2 (y = p − 1), order 4 (y = 0, x = ±√−1) and order 8
 * (y = ±y₈, two x each). Their other encodings (y + p, or the x-sign bit set with
 * x = 0) are non-canonical and refused before this table is consulted.
 */
const SMALL_ORDER_Y: readonly Uint8Array[] = [
  '0100000000000000000000000000000000000000000000000000000000000000',
  'ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f',
  '0000000000000000000000000000000000000000000000000000000000000000',
  'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a',
  '26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05',
].map((hex) => Uint8Array.from(Buffer.from(hex, 'hex')))

export function parsePublicKey(input: string): PublicKeyParse {
  if (typeof input !== 'string' || input.length > MAX_INPUT_CHARS) {
    return refuse('expected base64 or base64url of 32 bytes, or a PEM public key block')
  }
  // Keys are pasted from files and terminals: a trailing line feed is not an error.
  const text = input.trim()
  const key = text.startsWith('-----BEGIN') ? fromPem(text) : fromRawBase64(text)
  if (typeof key === 'string') return refuse(key)
  const problem = pointProblem(key)
  return problem === undefined ? { ok: true, key } : refuse(problem)
}

function refuse(reason: string): PublicKeyParse {
  return { ok: false, reason }
}

/** The 32 key bytes, or the reason the text is not a raw key. */
function fromRawBase64(text: string): Uint8Array | string {
  const url = RAW_BASE64URL.test(text)
  if (!url && !RAW_BASE64.test(text)) {
    return 'expected base64 or base64url of exactly 32 bytes, or a PEM public key block'
  }
  return decodeCanonical(text, url ? 'base64url' : 'base64') ?? 'base64 has non-zero trailing bits'
}

function fromPem(text: string): Uint8Array | string {
  const match = PEM_BLOCK.exec(text)
  if (match === null) return 'malformed PEM: expected one -----BEGIN PUBLIC KEY----- block'
  const body = match[1]!.replace(/\r?\n/g, '')
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body) || body.length % 4 !== 0) return 'malformed PEM: invalid base64'
  const der = decodeCanonical(body, 'base64')
  if (der === undefined) return 'malformed PEM: non-canonical base64'
  if (der.byteLength !== ED25519_SPKI_PREFIX.byteLength + KEY_BYTES) {
    return 'PEM is not an Ed25519 public key (wrong length)'
  }
  for (let i = 0; i < ED25519_SPKI_PREFIX.byteLength; i++) {
    if (der[i] !== ED25519_SPKI_PREFIX[i]) return 'PEM is not an Ed25519 public key (OID 1.3.101.112)'
  }
  return der.slice(ED25519_SPKI_PREFIX.byteLength)
}

/**
 * Node's base64 decoder ignores stray bits and characters; re-encoding and comparing
 * makes one key have exactly one accepted spelling per alphabet (padding aside).
 */
function decodeCanonical(text: string, encoding: 'base64' | 'base64url'): Uint8Array | undefined {
  const bytes = Buffer.from(text, encoding)
  const unpadded = text.replace(/=+$/, '')
  if (bytes.toString(encoding).replace(/=+$/, '') !== unpadded) return undefined
  // A copy, so the key does not pin Node's shared Buffer pool slab.
  return Uint8Array.from(bytes)
}

/**
 * Why `key` is not an acceptable Ed25519 point, or undefined when it is.
 * libsodium's crypto_core_ed25519_is_valid_point alone refuses every case below
 * (canonical y < p, not small order, on the curve, in the prime-order subgroup;
 * the tests check each case against it directly). The two explicit checks before
 * it exist to give the creator a precise reason, not because it misses them.
 */
function pointProblem(key: Uint8Array): string | undefined {
  if (key.byteLength !== KEY_BYTES) return `public key must be ${KEY_BYTES} bytes, got ${key.byteLength}`
  if (!isCanonicalY(key)) return 'non-canonical point encoding (y >= 2^255 - 19)'
  if (isSmallOrder(key)) return 'small-order point (a torsion point, not a usable key)'
  if (!sodium.crypto_core_ed25519_is_valid_point(key as Buffer)) {
    return 'not a valid Ed25519 public key (off the curve or outside the prime-order subgroup)'
  }
  return undefined
}

/** y, read little-endian without the x-sign bit, is below p = 2^255 − 19. */
function isCanonicalY(key: Uint8Array): boolean {
  // y >= p only when y is one of p .. 2^255 − 1: ff..ff in bytes 1..30, 7f top, ≥ ed low.
  if ((key[31]! & 0x7f) !== 0x7f) return true
  for (let i = 30; i >= 1; i--) if (key[i] !== 0xff) return true
  return key[0]! < 0xed
}

function isSmallOrder(key: Uint8Array): boolean {
  return SMALL_ORDER_Y.some((y) => {
    for (let i = 0; i < 31; i++) if (key[i] !== y[i]) return false
    return (key[31]! & 0x7f) === y[31]
  })
}
