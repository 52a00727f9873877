import { execFileSync } from 'node:child_process'
import { createPrivateKey, generateKeyPairSync, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { generateCreatorKeyPem, KeyFormatError, loadCreatorKey } from '@signal-ingest-gateway/sdk'

/** The raw public key node:crypto derives, unpadded base64url: an independent derivation. */
const nodePublicKey = (privatePem: string | Buffer) => createPrivateKey(privatePem).export({ format: 'jwk' }).x as string
const seedDer = (seed: Buffer) => Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed])

const dir = mkdtempSync(join(tmpdir(), 'sdk-keys-'))
t.teardown(() => rmSync(dir, { recursive: true, force: true }))
const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] })

t.test('the PEM file `openssl genpkey -algorithm ed25519` writes loads, as text and as the bytes of the file', async (t) => {
  const file = join(dir, 'source-key.pem')
  openssl('genpkey', '-algorithm', 'ed25519', '-out', file)
  const text = readFileSync(file, 'utf8')
  const expected = nodePublicKey(text)
  t.equal((await loadCreatorKey(text)).publicKey, expected)
  t.equal((await loadCreatorKey(readFileSync(file))).publicKey, expected, 'a Buffer of the file')
  // openssl's own public key, from the same file
  const spki = openssl('pkey', '-in', file, '-pubout', '-outform', 'DER')
  t.equal(expected, spki.subarray(12).toString('base64url'))
})

t.test('PKCS#8 DER, v1 and v2 (RFC 5958, public key attached), loads', async (t) => {
  const seed = randomBytes(32)
  const expected = nodePublicKey(createPrivateKey({ key: seedDer(seed), format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }) as string)
  t.equal((await loadCreatorKey(seedDer(seed))).publicKey, expected)
  const pub = Buffer.from(expected, 'base64url')
  const v2 = Buffer.concat([Buffer.from('3051020101300506032b657004220420', 'hex'), seed, Buffer.from('812100', 'hex'), pub])
  t.equal((await loadCreatorKey(v2)).publicKey, expected)
  const pem = `-----BEGIN PRIVATE KEY-----\n${v2.toString('base64')}\n-----END PRIVATE KEY-----\n`
  t.equal((await loadCreatorKey(pem)).publicKey, expected)
  const wrongPub = Buffer.concat([v2.subarray(0, v2.length - 32), Buffer.from(nodePublicKey(generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' })), 'base64url')])
  await t.rejects(loadCreatorKey(wrongPub), { code: 'invalid_key', message: /does not belong/ }, 'an attached public key of another key')
})

t.test('a 32-byte seed loads as bytes, 64 hex digits, base64 and base64url', async (t) => {
  const seed = randomBytes(32)
  const expected = nodePublicKey(createPrivateKey({ key: seedDer(seed), format: 'der', type: 'pkcs8' }).export({ format: 'pem', type: 'pkcs8' }) as string)
  for (const input of [new Uint8Array(seed), seed.toString('hex'), seed.toString('hex').toUpperCase(), seed.toString('base64'), seed.toString('base64url'), ` ${seed.toString('base64')}\n`]) {
    t.equal((await loadCreatorKey(input)).publicKey, expected, typeof input === 'string' ? `text of ${input.trim().length} characters` : 'bytes')
  }
})

t.test("loading leaves the caller's bytes as they were (the loader wipes only its own copy)", async (t) => {
  const seed = randomBytes(32)
  const copy = Buffer.from(seed)
  await loadCreatorKey(seed)
  t.same(seed, copy)
  const der = seedDer(seed)
  const derCopy = Buffer.from(der)
  await loadCreatorKey(der)
  t.same(der, derCopy)
})

t.test('generateCreatorKeyPem writes a PEM key node:crypto and openssl read, and the SDK loads', async (t) => {
  const pem = generateCreatorKeyPem()
  t.match(pem, /^-----BEGIN PRIVATE KEY-----\n[A-Za-z0-9+/]{64}\n-----END PRIVATE KEY-----\n$/)
  t.equal((await loadCreatorKey(pem)).publicKey, nodePublicKey(pem))
  const file = join(dir, 'generated.pem')
  execFileSync('sh', ['-c', `cat > ${file}`], { input: pem })
  t.match(openssl('pkey', '-in', file, '-noout', '-text').toString(), /ED25519 Private-Key/)
  t.not(generateCreatorKeyPem(), pem, 'a new key each time')
})

t.test('anything else is refused with a KeyFormatError naming what it is', async (t) => {
  const encrypted = join(dir, 'encrypted.pem')
  openssl('genpkey', '-algorithm', 'ed25519', '-aes-256-cbc', '-pass', 'pass:secret', '-out', encrypted)
  const ed448 = join(dir, 'ed448.pem')
  openssl('genpkey', '-algorithm', 'ed448', '-out', ed448)
  const ed = generateKeyPairSync('ed25519')
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const cases: Array<[string, string | Uint8Array, RegExp]> = [
    ['an encrypted PEM key', readFileSync(encrypted, 'utf8'), /encrypted/],
    ['a public key', ed.publicKey.export({ format: 'pem', type: 'spki' }) as string, /public key/],
    ['an Ed448 key', readFileSync(ed448, 'utf8'), /not Ed25519/],
    ['a P-256 key', ec.privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, /not Ed25519/],
    ['a SEC1 EC key', ec.privateKey.export({ format: 'pem', type: 'sec1' }) as string, /BEGIN EC PRIVATE KEY/],
    ['two PEM blocks', `${generateCreatorKeyPem()}${generateCreatorKeyPem()}`, /one PEM block, found 2/],
    ['a PEM block that is not base64', '-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----', /not valid base64/],
    ['a truncated DER', seedDer(randomBytes(32)).subarray(0, 40), /truncated/],
    ['DER with bytes after it', Buffer.concat([seedDer(randomBytes(32)), Buffer.from([0])]), /after the PKCS#8/],
    ['31 bytes', Buffer.alloc(31, 7), /31 bytes/],
    ['33 bytes', Buffer.alloc(33, 7), /33 bytes/],
    ['62 hex digits', randomBytes(31).toString('hex'), /64 hex digits/],
    ['a password', 'correct horse battery staple', /PEM block/],
    ['an empty string', '', /PEM block/],
  ]
  for (const [what, input, message] of cases) {
    const err = await loadCreatorKey(input).then(
      () => undefined,
      (e: unknown) => e,
    )
    t.ok(err instanceof KeyFormatError, what)
    t.match(err, { code: 'invalid_key', message }, what)
  }
  await t.rejects(loadCreatorKey(42 as unknown as string), { code: 'invalid_key' }, 'not a string or bytes')
})
