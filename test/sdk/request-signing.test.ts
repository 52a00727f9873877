import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto'
import t from 'tap'
import { isValidNonce, parseSignatureHeader } from '../../gateway/ingest-headers.js'
import { creatorKeyFromSeed, signPush } from '../../harness/signed-push.js'
import { loadCreatorKey, newNonce, signRequest, type CreatorKey } from '@signal-ingest-gateway/sdk'

/** Verifies with node:crypto over a signing string written out here, not with the SDK's or the gateway's code. */
function verifiedByNode(key: CreatorKey, path: string, headers: Readonly<Record<string, string>>, body: Uint8Array): boolean {
  const hash = createHash('sha256').update(body).digest('hex')
  const message = `POST\n${path}\n${headers['x-svc-timestamp']}\n${headers['x-svc-nonce']}\n${hash}`
  const signature = parseSignatureHeader(headers['x-svc-signature'] as string)
  if (signature === undefined) return false
  const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.publicKey }, format: 'jwk' })
  return verify(null, Buffer.from(message), publicKey, signature)
}

const seed = randomBytes(32)
const body = JSON.stringify({ signal_id: 'sig_signing_1', note: 'ünïcødé ✓' })

t.test('on Node 20 the default backend is WebCrypto, and both backends sign what node:crypto verifies', async (t) => {
  const web = await loadCreatorKey(seed)
  const noble = await loadCreatorKey(seed, { backend: 'noble' })
  t.equal(web.backend, 'webcrypto')
  t.equal(noble.backend, 'noble')
  t.equal(web.publicKey, noble.publicKey)
  for (const key of [web, noble]) {
    const signed = await signRequest({ sourceId: 'src_abc', keyId: 'key_1', key, body })
    t.equal(signed.path, '/v1/byo/sources/src_abc/signals')
    t.ok(verifiedByNode(key, signed.path, signed.headers, signed.body), `${key.backend} signature verifies`)
    t.ok(!verifiedByNode(key, signed.path, signed.headers, new TextEncoder().encode(body + ' ')), `${key.backend}: the body is covered`)
  }
  const fixed = { sourceId: 'src_abc', keyId: 'key_1', body, timestamp: '2030-01-02T03:04:05.678Z', nonce: 'nonce-1' }
  const a = await signRequest({ ...fixed, key: web })
  const b = await signRequest({ ...fixed, key: noble })
  t.same(a.headers, b.headers, 'Ed25519 is deterministic: the same signature from both')
})

t.test("the SDK's request is byte for byte the tests' node:crypto signer's (the headers the gateway reads)", async (t) => {
  const key = await loadCreatorKey(seed)
  const payload = { signal_id: 'sig_same_bytes', note: 'x' }
  const fixed = { timestamp: new Date().toISOString(), nonce: newNonce(), idempotencyKey: 'sig_same_bytes' }
  const sdk = await signRequest({ sourceId: 'src_1', keyId: 'key_9', key, body: JSON.stringify(payload), pathPrefix: '/gw', ...fixed })
  const node = signPush({ baseUrlPath: '/gw', sourceId: 'src_1', keyId: 'key_9', key: creatorKeyFromSeed(seed), payload, ...fixed })
  t.equal(sdk.path, node.path)
  t.same(sdk.headers, node.headers)
  t.same(Buffer.from(sdk.body), node.body)
  t.equal(sdk.headers['idempotency-key'], 'sig_same_bytes')
  t.equal(sdk.headers['content-type'], 'application/json')
})

t.test('defaults: the timestamp is now in ISO 8601 UTC, the nonce is fresh, 22 base64url characters, and one the gateway takes', async (t) => {
  const key = await loadCreatorKey(seed)
  const before = Date.now()
  const one = await signRequest({ sourceId: 's', keyId: 'k', key, body: '{}' })
  const two = await signRequest({ sourceId: 's', keyId: 'k', key, body: '{}' })
  const ts = one.headers['x-svc-timestamp'] as string
  t.match(ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  t.ok(Date.parse(ts) >= before - 1 && Date.parse(ts) <= Date.now() + 1)
  t.match(one.headers['x-svc-nonce'], /^[A-Za-z0-9_-]{22}$/)
  t.ok(isValidNonce(one.headers['x-svc-nonce'] as string))
  t.not(one.headers['x-svc-nonce'], two.headers['x-svc-nonce'])
  t.not(one.headers['x-svc-signature'], two.headers['x-svc-signature'])
  t.equal(one.headers['idempotency-key'], undefined, 'no Idempotency-Key unless given')
  // the gateway's parser takes it: canonical base64 of 64 bytes
  t.equal(parseSignatureHeader(one.headers['x-svc-signature'] as string)?.length, 64)
})

t.test('where WebCrypto cannot import an Ed25519 key, auto falls back to @noble/ed25519 and webcrypto is refused', async (t) => {
  const subtle = globalThis.crypto.subtle
  const original = subtle.importKey
  // As in a browser without Ed25519: importKey rejects with NotSupportedError.
  subtle.importKey = (async () => {
    throw new DOMException('Unrecognized algorithm name', 'NotSupportedError')
  }) as typeof subtle.importKey
  t.teardown(() => {
    subtle.importKey = original
  })
  const key = await loadCreatorKey(seed)
  t.equal(key.backend, 'noble')
  const signed = await signRequest({ sourceId: 's', keyId: 'k', key, body })
  t.ok(verifiedByNode(key, signed.path, signed.headers, signed.body))
  await t.rejects(loadCreatorKey(seed, { backend: 'webcrypto' }), { code: 'backend_unavailable' })
})

t.test('without crypto.subtle at all (a page not served over HTTPS), keys load and requests are signed and hashed in JavaScript', async (t) => {
  const descriptor = Object.getOwnPropertyDescriptor(globalThis, 'crypto') as PropertyDescriptor
  const { getRandomValues } = globalThis.crypto
  Object.defineProperty(globalThis, 'crypto', { configurable: true, value: { getRandomValues: getRandomValues.bind(globalThis.crypto) } })
  t.teardown(() => {
    Object.defineProperty(globalThis, 'crypto', descriptor)
  })
  t.equal(globalThis.crypto.subtle, undefined)
  const key = await loadCreatorKey(seed)
  t.equal(key.backend, 'noble')
  const signed = await signRequest({ sourceId: 's', keyId: 'k', key, body })
  t.ok(verifiedByNode(key, signed.path, signed.headers, signed.body))
})
