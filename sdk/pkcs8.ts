import { fromBase64 } from './bytes.js'
import { KeyFormatError } from './errors.js'

/**
 * The 32-byte seed of an Ed25519 private key in PKCS#8 (RFC 8410), from the PEM block
 * `openssl genpkey -algorithm ed25519` writes or its DER bytes. A small DER reader rather
 * than a fixed prefix match, so the v2 form (RFC 5958, with the public key attached, as
 * some tools write) loads too; anything else is refused with what it is instead.
 */

export interface Pkcs8Ed25519 {
  readonly seed: Uint8Array
  /** The public key attached to a v2 (RFC 5958) key; the loader checks it against the seed. */
  readonly publicKey: Uint8Array | undefined
}

const ED25519_OID = '2b6570' // 1.3.101.112
const PEM_BLOCK = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/g

/** The DER inside the one PEM block of `text`, which must be labelled PRIVATE KEY. */
export function pemToDer(text: string): Uint8Array {
  const blocks = [...text.matchAll(PEM_BLOCK)]
  if (blocks.length === 0) throw new KeyFormatError('no PEM block found (expected -----BEGIN PRIVATE KEY-----, as openssl genpkey -algorithm ed25519 writes)')
  if (blocks.length > 1) throw new KeyFormatError(`expected one PEM block, found ${blocks.length}`)
  const [, label, body] = blocks[0] as RegExpMatchArray
  if (label === 'ENCRYPTED PRIVATE KEY') {
    throw new KeyFormatError('the PEM key is encrypted; write it unencrypted first (openssl pkey -in key.pem -out plain.pem) and keep that file private')
  }
  if (label === 'PUBLIC KEY') throw new KeyFormatError('this is a public key; signing needs the private key (-----BEGIN PRIVATE KEY-----)')
  if (label !== 'PRIVATE KEY') throw new KeyFormatError(`expected a PKCS#8 block (-----BEGIN PRIVATE KEY-----), found -----BEGIN ${label}-----`)
  const der = fromBase64((body as string).replace(/\s+/g, ''))
  if (der === undefined || der.length === 0) throw new KeyFormatError('the PEM block is not valid base64')
  return der
}

/** The Ed25519 seed (and attached public key, if any) in PKCS#8 DER. */
export function parsePkcs8Ed25519(der: Uint8Array): Pkcs8Ed25519 {
  const reader = new DerReader(der)
  const outer = reader.read(0x30, 'PrivateKeyInfo')
  if (!reader.done) throw new KeyFormatError('unexpected bytes after the PKCS#8 structure')
  const info = new DerReader(outer)
  const version = info.read(0x02, 'version')
  if (version.length !== 1 || (version[0] !== 0 && version[0] !== 1)) throw new KeyFormatError('unsupported PKCS#8 version')
  const algorithm = new DerReader(info.read(0x30, 'algorithm'))
  const oid = hex(algorithm.read(0x06, 'algorithm OID'))
  if (oid !== ED25519_OID) throw new KeyFormatError(`the key is not Ed25519 (algorithm OID ${oid})`)
  if (!algorithm.done) throw new KeyFormatError('Ed25519 takes no algorithm parameters')
  const wrapped = new DerReader(info.read(0x04, 'privateKey'))
  const seed = wrapped.read(0x04, 'CurvePrivateKey')
  if (seed.length !== 32 || !wrapped.done) throw new KeyFormatError('an Ed25519 private key holds 32 bytes')
  if (!info.done && info.peek() === 0xa0) info.read(0xa0, 'attributes')
  let publicKey: Uint8Array | undefined
  if (!info.done && version[0] === 1) {
    const bits = info.read(0x81, 'publicKey')
    if (bits.length !== 33 || bits[0] !== 0) throw new KeyFormatError('the attached public key is not 32 bytes')
    publicKey = bits.subarray(1)
  }
  if (!info.done) throw new KeyFormatError('unexpected fields in the PKCS#8 structure')
  // Copies: on a Buffer, slice() would share the caller's memory, which the loader wipes.
  return { seed: new Uint8Array(seed), publicKey: publicKey === undefined ? undefined : new Uint8Array(publicKey) }
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')

/** Definite-length DER, as much as PKCS#8 needs: one tag byte, lengths up to 2^16. */
class DerReader {
  #at = 0
  constructor(private readonly bytes: Uint8Array) {}

  get done(): boolean {
    return this.#at === this.bytes.length
  }

  peek(): number | undefined {
    return this.bytes[this.#at]
  }

  read(tag: number, what: string): Uint8Array {
    const b = this.bytes
    if (b[this.#at] !== tag) throw new KeyFormatError(`not a PKCS#8 Ed25519 key: ${what} missing`)
    let at = this.#at + 1
    const first = b[at++]
    let length: number
    if (first === undefined) throw new KeyFormatError(`not a PKCS#8 Ed25519 key: ${what} truncated`)
    if (first < 0x80) length = first
    else if (first === 0x81 && (b[at] ?? 0) >= 0x80) length = b[at++] as number
    else if (first === 0x82 && (b[at] ?? 0) !== 0) {
      length = ((b[at] as number) << 8) | (b[at + 1] ?? 0)
      at += 2
    } else throw new KeyFormatError(`not a PKCS#8 Ed25519 key: ${what} has a bad length`)
    if (at + length > b.length) throw new KeyFormatError(`not a PKCS#8 Ed25519 key: ${what} truncated`)
    this.#at = at + length
    return b.subarray(at, at + length)
  }
}
