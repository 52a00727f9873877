/**
 * The verify ceiling: Ed25519 verifies per second on one core, for each candidate
 * implementation, on realistic signing strings. The ingest benchmark can compare its
 * accepted-requests rate against this figure measured in the same run, because the
 * machine's speed varies from run to run. docs/benchmarks.md ("Dependencies and
 * measured choices") records the figures that chose sodium-native.
 *
 *   node dist/bench/verify-ceiling.js [ms-per-implementation]
 */
import { createHash, createPublicKey, verify as nodeVerify, type KeyObject } from 'node:crypto'
import { cpus } from 'node:os'
import { argv, versions } from 'node:process'
import { pathToFileURL } from 'node:url'
import * as noble from '@noble/ed25519'
import { sha512 } from '@noble/hashes/sha2.js'
import sodium from 'sodium-native'
import { verifyEd25519 } from '../pipeline/verify/ed25519.js'

export type VerifyImpl = 'sodium-native' | 'node-crypto' | 'noble'
export const VERIFY_IMPLS: readonly VerifyImpl[] = ['sodium-native', 'node-crypto', 'noble']

// noble needs a synchronous SHA-512 for its sync `verify`.
noble.hashes.sha512 = sha512

// Ed25519 SPKI DER is this fixed 12-byte prefix followed by the 32 raw key bytes.
const SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

/** Several keys and messages so that no cache sees the same input twice in a row. */
const SAMPLES = 64
/** Verifies between clock reads: a clock read is cheap, but not free next to a 40 µs verify. */
const BATCH = 32

interface Sample {
  publicKey: Uint8Array
  message: Uint8Array
  signature: Uint8Array
}

/** A signing string as a creator builds it (method, path, timestamp, nonce, body hash): about 200 bytes. */
function signingString(i: number): Uint8Array {
  const bodyHash = createHash('sha256').update(`{"signal_id":"sig-${i}"}`).digest('hex')
  // A ULID-like source id and a nonce of 32 random bytes in base64url, as a creator SDK would send.
  const sourceId = `src_01J${i.toString(32).toUpperCase().padStart(23, '0')}`
  const nonce = createHash('sha256').update(`nonce-${i}`).digest('base64url')
  const text = [
    'POST',
    `/v1/byo/sources/${sourceId}/signals`,
    new Date(1_750_000_000_000 + i * 1001).toISOString(),
    nonce,
    bodyHash,
  ].join('\n')
  return new TextEncoder().encode(text)
}

function makeSamples(): Sample[] {
  const samples: Sample[] = []
  for (let i = 0; i < SAMPLES; i++) {
    const publicKey = Buffer.alloc(sodium.crypto_sign_PUBLICKEYBYTES)
    const secretKey = Buffer.alloc(sodium.crypto_sign_SECRETKEYBYTES)
    sodium.crypto_sign_keypair(publicKey, secretKey)
    const message = Buffer.from(signingString(i))
    const signature = Buffer.alloc(sodium.crypto_sign_BYTES)
    sodium.crypto_sign_detached(signature, message, secretKey)
    samples.push({ publicKey, message, signature })
  }
  return samples
}

/** One verify function per implementation, with key parsing done up front as a gateway would cache it. */
function verifierFor(impl: VerifyImpl, samples: Sample[]): (i: number) => boolean {
  switch (impl) {
    case 'sodium-native':
      return (i) => {
        const s = samples[i]!
        return verifyEd25519(s.publicKey, s.message, s.signature)
      }
    case 'node-crypto': {
      const keys: KeyObject[] = samples.map((s) =>
        createPublicKey({ key: Buffer.concat([SPKI_PREFIX, s.publicKey]), format: 'der', type: 'spki' }),
      )
      return (i) => {
        const s = samples[i]!
        return nodeVerify(null, s.message, keys[i]!, s.signature)
      }
    }
    case 'noble':
      return (i) => {
        const s = samples[i]!
        // zip215: false is RFC 8032 strictness, the mode that passes all Wycheproof vectors.
        return noble.verify(s.signature, s.message, s.publicKey, { zip215: false })
      }
  }
}

function run(verify: (i: number) => boolean, ms: number): { count: number; elapsedMs: number } {
  let count = 0
  const start = performance.now()
  let now = start
  while (now - start < ms) {
    for (let b = 0; b < BATCH; b++) {
      // A verifier that says false would be measuring its failure path.
      if (!verify(count % SAMPLES)) throw new Error(`verify returned false on sample ${count % SAMPLES}`)
      count++
    }
    now = performance.now()
  }
  return { count, elapsedMs: now - start }
}

/**
 * Verifies per second of `impl` on the calling thread, measured for about `ms`
 * milliseconds after a short warm-up (so the JIT and the native code are hot).
 */
export async function measureVerifyRate(impl: VerifyImpl, ms: number): Promise<number> {
  const samples = makeSamples()
  const verify = verifierFor(impl, samples)
  run(verify, Math.min(200, ms / 5))
  // Let pending work (GC, timers) settle between warm-up and measurement.
  await new Promise((resolve) => setImmediate(resolve))
  const { count, elapsedMs } = run(verify, ms)
  return (count * 1000) / elapsedMs
}

async function main(): Promise<void> {
  const ms = Number(argv[2] ?? 3000)
  const cpu = cpus()
  console.log(`machine: ${cpu[0]?.model ?? 'unknown'}, ${cpu.length} cores`)
  console.log(`node ${versions.node}, openssl ${versions.openssl}`)
  console.log(`single core, ${SAMPLES} keys, signing strings of ${signingString(0).byteLength} bytes, ${ms} ms each`)
  for (const impl of VERIFY_IMPLS) {
    const rate = await measureVerifyRate(impl, ms)
    console.log(`${impl.padEnd(14)} ${Math.round(rate).toLocaleString('en-US').padStart(8)} verifies/s`)
  }
}

if (argv[1] !== undefined && import.meta.url === pathToFileURL(argv[1]).href) {
  await main()
}
