import { hash, randomBytes } from 'node:crypto'
import sodium from 'sodium-native'

/** Ids are at most 128 characters (3 bytes each at most in UTF-8); a longer string gets a buffer of its own. */
const SCRATCH = Buffer.alloc(1024)
const DIGEST = Buffer.alloc(sodium.crypto_shorthash_BYTES)

/**
 * A 64-bit keyed hash of a string, as two 32-bit halves, for the expiring indexes.
 * The strings (nonces, signal ids, idempotency keys) are chosen by creators, and a
 * creator may set its own max_rate, so a fast unkeyed hash would let one of them pick
 * strings that pile into one probe chain and slow every lookup of every source (hash
 * flooding). SipHash-2-4 (libsodium's crypto_shorthash, made for exactly this) under a
 * key of its own (one per store, random unless the store is restored from a snapshot
 * written at shutdown) makes both table positions and collisions unpredictable: 0.37 µs
 * per key measured here, against 0.8 to 1.1 µs for SHA-256 over the key and the string
 * and 1.1 µs for a JavaScript SipHash. Writes into `out` so the caller allocates nothing.
 */
export class KeyedHash64 {
  static readonly KEY_BYTES = sodium.crypto_shorthash_KEYBYTES
  readonly key: Buffer

  constructor(key: Uint8Array = randomBytes(KeyedHash64.KEY_BYTES)) {
    if (key.length !== KeyedHash64.KEY_BYTES) throw new RangeError(`a SipHash key has ${KeyedHash64.KEY_BYTES} bytes, got ${key.length}`)
    this.key = Buffer.from(key)
  }

  hash(s: string, seed: number, out: Uint32Array): void {
    const text = `${seed}\n${s}`
    const input = text.length * 3 <= SCRATCH.length ? SCRATCH.subarray(0, SCRATCH.write(text)) : Buffer.from(text)
    sodium.crypto_shorthash(DIGEST, input, this.key)
    out[0] = DIGEST.readUInt32LE(0)
    out[1] = DIGEST.readUInt32LE(4)
  }
}

/**
 * The same kind of hash under a caller's secret that outlives the process, for the
 * fingerprints the signal-id history keeps on disk: SHA-256, which files written by
 * earlier versions were made with.
 */
export function keyedHash64(secret: string, s: string, out: Uint32Array): void {
  const digest = hash('sha256', `${secret}\n${s}`, 'buffer') as unknown as Buffer
  out[0] = digest.readUInt32LE(0)
  out[1] = digest.readUInt32LE(4)
}
