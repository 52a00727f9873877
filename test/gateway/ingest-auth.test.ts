import t from 'tap'
import { generateCreatorKey, signPush } from '../../harness/signed-push.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

const gw = await startTestGateway(t)
const src = await provision(gw)

const expectError = (res: { status: number; body: any; headers: Headers }, status: number, code: string, what = '') => {
  t.equal(res.status, status, `status ${status} ${what}`.trim())
  t.equal(res.body?.ok, false)
  t.equal(res.body?.error?.code, code, `code ${code}: ${res.body?.error?.message}`)
  t.type(res.body?.error?.message, 'string')
  t.match(res.body?.error?.request_id, /^req_/)
  t.equal(res.headers.get('x-request-id'), res.body?.error?.request_id, 'request id also sent as X-Request-Id')
  if (status === 401) t.match(res.headers.get('www-authenticate'), /^Svc-Ed25519 realm="signals", headers="X-Svc-Source-Id X-Svc-Key-Id X-Svc-Timestamp X-Svc-Nonce X-Svc-Signature"$/, 'a 401 names the signed-request scheme')
  else t.equal(res.headers.get('www-authenticate'), null, 'only a 401 carries a challenge')
}

t.test('a correctly signed signal is accepted with ok, status accepted, signal_id, source_id and received_at', async (t) => {
  const p = payload(src.sourceId)
  const before = Date.now()
  const res = await push(gw, src.sign(p))
  t.equal(res.status, 202)
  t.same(Object.keys(res.body).sort(), ['ok', 'received_at', 'signal_id', 'source_id', 'status'])
  t.equal(res.body.ok, true)
  t.equal(res.body.signal_id, p.signal_id)
  t.equal(res.body.source_id, src.sourceId)
  t.equal(res.body.status, 'accepted')
  t.match(res.body.received_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
  t.ok(Date.parse(res.body.received_at) >= before - 5 && Date.parse(res.body.received_at) <= Date.now() + 5, 'received_at is the arrival time')
})

for (const header of ['x-svc-key-id', 'x-svc-timestamp', 'x-svc-nonce', 'x-svc-signature']) {
  t.test(`a request without ${header} is refused with 401 missing_signature`, async (t) => {
    const signed = src.sign(payload(src.sourceId))
    delete signed.headers[header]
    expectError(await push(gw, signed), 401, 'missing_signature')
  })
}

t.test('a request without X-Svc-Source-Id is refused with 401 missing_signature', async () => {
  const signed = src.sign(payload(src.sourceId))
  delete signed.headers['x-svc-source-id']
  expectError(await push(gw, signed), 401, 'missing_signature')
})

t.test('a signature header not of the form ed25519=:<base64>: is refused with 401 missing_signature', async () => {
  const signed = src.sign(payload(src.sourceId))
  const b64 = signed.headers['x-svc-signature']!.slice('ed25519=:'.length, -1)
  for (const bad of [b64, `ed25519=${b64}`, `ed25519=:${b64}`, `hmac=:${b64}:`, `ed25519=:${b64.slice(4)}:`]) {
    expectError(await push(gw, { ...signed, headers: { ...signed.headers, 'x-svc-signature': bad } }), 401, 'missing_signature')
  }
})

t.test('a timestamp header that is not ISO 8601 UTC is refused with 401 missing_signature', async () => {
  for (const ts of ['yesterday', '2026-01-01 10:00:00', '2026-01-01T10:00:00+02:00', String(Date.now())]) {
    expectError(await push(gw, src.sign(payload(src.sourceId), { timestamp: ts })), 401, 'missing_signature')
  }
})

t.test('an unknown key id is refused with 401 unknown_key', async () => {
  expectError(await push(gw, src.sign(payload(src.sourceId), { keyId: 'key_doesnotexist' })), 401, 'unknown_key')
})

t.test('a key of another source is unknown here', async () => {
  const other = await provision(gw)
  const signed = signPush({ sourceId: src.sourceId, keyId: other.keyId, key: other.key, payload: payload(src.sourceId) })
  expectError(await push(gw, signed), 401, 'unknown_key')
})

t.test('an unknown source looks like an unknown key, so source ids cannot be probed', async () => {
  const signed = signPush({ sourceId: 'src_nope', keyId: src.keyId, key: src.key, payload: payload('src_nope') })
  expectError(await push(gw, signed), 401, 'unknown_key')
})

t.test('a signature by a different private key is refused with 401 invalid_signature and its message', async (t) => {
  const res = await push(gw, src.sign(payload(src.sourceId), { key: generateCreatorKey() }))
  expectError(res, 401, 'invalid_signature')
  t.equal(res.body.error.message, 'request signature could not be verified')
})

t.test('a body changed after signing is refused with 401 invalid_signature', async () => {
  const signed = src.sign(payload(src.sourceId))
  const tampered = Buffer.from(signed.body.toString().replace('"warning"', '"critical"'))
  expectError(await push(gw, { ...signed, body: tampered }), 401, 'invalid_signature')
})

t.test('the signature covers the raw bytes: the same JSON re-serialised with other spacing fails', async () => {
  const signed = src.sign(payload(src.sourceId))
  const spaced = Buffer.from(JSON.stringify(JSON.parse(signed.body.toString()), null, 1))
  expectError(await push(gw, { ...signed, body: spaced }), 401, 'invalid_signature')
})

t.test('a signature over another path is refused with 401 invalid_signature', async () => {
  const signed = signPush({ baseUrlPath: '/prefix', sourceId: src.sourceId, keyId: src.keyId, key: src.key, payload: payload(src.sourceId) })
  expectError(await push(gw, { ...signed, path: `/v1/byo/sources/${src.sourceId}/signals` }), 401, 'invalid_signature')
})

t.test('a signed nonce swapped for another is refused with 401 invalid_signature', async () => {
  const signed = src.sign(payload(src.sourceId))
  expectError(await push(gw, { ...signed, headers: { ...signed.headers, 'x-svc-nonce': 'another-nonce-1234' } }), 401, 'invalid_signature')
})

t.test('a request timestamp 301 seconds old is refused with 401 stale_timestamp', async () => {
  const ts = new Date(Date.now() - 301_000).toISOString()
  expectError(await push(gw, src.sign(payload(src.sourceId, { ts }), { timestamp: ts })), 401, 'stale_timestamp')
})

t.test('a request timestamp 301 seconds in the future is refused with 401 stale_timestamp', async () => {
  const ts = new Date(Date.now() + 301_000).toISOString()
  expectError(await push(gw, src.sign(payload(src.sourceId, { ts }), { timestamp: ts })), 401, 'stale_timestamp')
})

t.test('a request timestamp 290 seconds off either way is accepted', async (t) => {
  for (const offset of [-290_000, 290_000]) {
    const ts = new Date(Date.now() + offset).toISOString()
    const res = await push(gw, src.sign(payload(src.sourceId, { ts }), { timestamp: ts }))
    t.equal(res.status, 202, `offset ${offset}`)
  }
})

t.test('a reused nonce is refused with 401 replayed_nonce even with a fresh body', async () => {
  const nonce = `nonce-${Date.now()}`
  const first = await push(gw, src.sign(payload(src.sourceId), { nonce }))
  t.equal(first.status, 202)
  expectError(await push(gw, src.sign(payload(src.sourceId), { nonce })), 401, 'replayed_nonce')
})

t.test('an exact replay of a request (same nonce, same signature) is refused with 401 replayed_nonce', async () => {
  const signed = src.sign(payload(src.sourceId))
  t.equal((await push(gw, signed)).status, 202)
  expectError(await push(gw, signed), 401, 'replayed_nonce')
})

t.test('nonces are scoped per source and key: the same nonce under another key is fine', async (t) => {
  const other = await provision(gw)
  const nonce = `shared-nonce-${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { nonce }))).status, 202)
  t.equal((await push(gw, other.sign(payload(other.sourceId), { nonce }))).status, 202)
})

t.test('nonces are scoped per key within one source: two keys of the same source may use the same nonce', async (t) => {
  const own = await provision(gw)
  const second = generateCreatorKey()
  const reg = await call(gw.url, 'POST', `/v1/byo/sources/${own.sourceId}/keys`, { token: own.creatorToken, body: { public_key: second.publicKeyBase64 } })
  t.equal(reg.status, 201)
  const nonce = `same-source-nonce-${Date.now()}`
  t.equal((await push(gw, own.sign(payload(own.sourceId), { nonce }))).status, 202, 'the active key')
  const test = await push(gw, own.sign(payload(own.sourceId), { nonce, keyId: reg.body.data.key_id, key: second }))
  t.equal(test.status, 202, 'the pending key, same nonce')
  t.equal(test.body.test, true)
  expectError(await push(gw, own.sign(payload(own.sourceId), { nonce, keyId: reg.body.data.key_id, key: second })), 401, 'replayed_nonce')
})

t.test('a nonce longer than 128 characters is refused as malformed with 401 missing_signature', async () => {
  expectError(await push(gw, src.sign(payload(src.sourceId), { nonce: 'x'.repeat(129) })), 401, 'missing_signature')
})

t.test('header source id different from the URL is refused with 400 invalid_source_id', async () => {
  const signed = src.sign(payload(src.sourceId))
  expectError(await push(gw, { ...signed, headers: { ...signed.headers, 'x-svc-source-id': 'src_other' } }), 400, 'invalid_source_id')
})

t.test('body source_id different from the URL is refused with 400 invalid_source_id, listed with its signal id', async (t) => {
  const p = payload('src_other')
  const res = await push(gw, src.sign(p))
  expectError(res, 400, 'invalid_source_id')
  const listed = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?limit=200`, { token: src.creatorToken })
  const entry = listed.body.data.find((e: any) => e.request_id === res.body.error.request_id)
  t.equal(entry?.signal_id, p.signal_id, 'the refusal names the signal the creator sent')
})

t.test('a refusal for a missing auth header still lists the key id the request named', async (t) => {
  const signed = src.sign(payload(src.sourceId))
  delete signed.headers['x-svc-nonce']
  const res = await push(gw, signed)
  expectError(res, 401, 'missing_signature')
  const listed = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?limit=200`, { token: src.creatorToken })
  t.equal(listed.body.data.find((e: any) => e.request_id === res.body.error.request_id)?.key_id, src.keyId)
})

t.test('a refusal before the signature check (stale timestamp) or at it lists the signal id of the body', async (t) => {
  const stale = payload(src.sourceId)
  const ts = new Date(Date.now() - 400_000).toISOString()
  const staleRes = await push(gw, src.sign(stale, { timestamp: ts }))
  expectError(staleRes, 401, 'stale_timestamp')
  const forged = payload(src.sourceId)
  const forgedRes = await push(gw, src.sign(forged, { key: generateCreatorKey() }))
  expectError(forgedRes, 401, 'invalid_signature')
  const listed = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?limit=200`, { token: src.creatorToken })
  const signalIdOf = (res: typeof staleRes) => listed.body.data.find((e: any) => e.request_id === res.body.error.request_id)?.signal_id
  t.equal(signalIdOf(staleRes), stale.signal_id, 'the stale request names its signal')
  t.equal(signalIdOf(forgedRes), forged.signal_id, 'the badly signed request names its signal')
})

t.test('check precedence: a source id mismatch is reported before a bad signature', async () => {
  const signed = src.sign(payload('src_other'), { key: generateCreatorKey() })
  expectError(await push(gw, signed), 400, 'invalid_source_id')
})

t.test('check precedence: a body source_id that is missing, null or a number is refused before the signature', async (t) => {
  for (const sourceId of [undefined, null, 7]) {
    // Signed by a key the source does not have: a later check would answer 401.
    const signed = src.sign(payload(src.sourceId, { source_id: sourceId }), { key: generateCreatorKey() })
    expectError(await push(gw, signed), 400, 'invalid_source_id')
  }
})

t.test('check precedence: a body without source_id reusing an accepted signal_id is a source id error, not a conflict', async (t) => {
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  expectError(await push(gw, src.sign({ ...p, source_id: undefined })), 400, 'invalid_source_id')
})

// The three source ids (URL, header, body) are checked before signature, timestamp and nonce.
t.test('check precedence: a body source_id mismatch is reported before every auth check (the three source ids are checked first)', async () => {
  const other = payload('src_other')
  const stale = new Date(Date.now() - 400_000).toISOString()
  expectError(await push(gw, src.sign(other, { timestamp: stale })), 400, 'invalid_source_id', 'before a stale timestamp')
  expectError(await push(gw, src.sign(other, { keyId: 'key_unknownunknown1234' })), 400, 'invalid_source_id', 'before an unknown key')
  const signed = src.sign(other)
  const { 'x-svc-signature': _dropped, ...unsigned } = signed.headers
  expectError(await push(gw, { ...signed, headers: unsigned }), 400, 'invalid_source_id', 'before a missing auth header')
})

t.test('check precedence: an X-Svc-Source-Id mismatch is reported before every auth check', async () => {
  const withHeader = (signed: ReturnType<typeof src.sign>) => ({ ...signed, headers: { ...signed.headers, 'x-svc-source-id': 'src_other' } })
  const stale = new Date(Date.now() - 400_000).toISOString()
  expectError(await push(gw, withHeader(src.sign(payload(src.sourceId), { keyId: 'key_unknownunknown1234' }))), 400, 'invalid_source_id', 'before an unknown key')
  expectError(await push(gw, withHeader(src.sign(payload(src.sourceId), { timestamp: stale }))), 400, 'invalid_source_id', 'before a stale timestamp')
  expectError(await push(gw, withHeader(src.sign(payload(src.sourceId), { key: generateCreatorKey() }))), 400, 'invalid_source_id', 'before a bad signature')
})

t.test('check precedence: a timestamp over 300 s ahead is refused at the edge, before the signature is checked', async () => {
  const ahead = new Date(Date.now() + 400_000).toISOString()
  expectError(await push(gw, src.sign(payload(src.sourceId), { timestamp: ahead, key: generateCreatorKey() })), 401, 'stale_timestamp')
})

t.test('check precedence: a malformed Idempotency-Key is reported after the signature and the nonce', async (t) => {
  expectError(await push(gw, src.sign(payload(src.sourceId), { idempotencyKey: 'bad key!', key: generateCreatorKey() })), 401, 'invalid_signature')
  const nonce = `prec-idem-${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { nonce }))).status, 202)
  expectError(await push(gw, src.sign(payload(src.sourceId), { nonce, idempotencyKey: 'bad key!' })), 401, 'replayed_nonce')
})

t.test('check precedence: a stale timestamp is reported before a bad signature', async () => {
  const ts = new Date(Date.now() - 400_000).toISOString()
  expectError(await push(gw, src.sign(payload(src.sourceId), { timestamp: ts, key: generateCreatorKey() })), 401, 'stale_timestamp')
})

t.test('check precedence: a bad signature is reported before a replayed nonce and before field errors', async () => {
  const nonce = `prec-${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { nonce }))).status, 202)
  expectError(await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' }), { nonce, key: generateCreatorKey() })), 401, 'invalid_signature')
})

t.test('check precedence: a replayed nonce is reported before field validation', async () => {
  const nonce = `prec2-${Date.now()}`
  t.equal((await push(gw, src.sign(payload(src.sourceId), { nonce }))).status, 202)
  expectError(await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' }), { nonce })), 401, 'replayed_nonce')
})

t.test('check precedence: a signal_id conflict is reported before field validation', async () => {
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  expectError(await push(gw, src.sign({ ...p, severity: 'nope' })), 409, 'idempotency_conflict')
})

t.test('refused requests are listed, newest first, in the source ingest errors', async (t) => {
  const res = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?limit=200`, { token: src.creatorToken })
  t.equal(res.status, 200)
  const codes = new Set(res.body.data.map((e: any) => e.code))
  for (const code of ['missing_signature', 'invalid_signature', 'stale_timestamp', 'replayed_nonce', 'invalid_source_id', 'idempotency_conflict']) {
    t.ok(codes.has(code), `has ${code}`)
  }
  const times = res.body.data.map((e: any) => e.time)
  t.same(times, [...times].sort().reverse(), 'newest first')
  const first = res.body.data[0]
  t.same(Object.keys(first).sort(), ['client_address', 'code', 'key_id', 'request_id', 'signal_id', 'status', 'time'])
  t.equal(first.client_address, '127.0.0.1', 'the address the request came from')
})

t.test('the request skew is checked at the edge, before the signature: 301 s old with a bad signature is stale_timestamp', async () => {
  const ts = new Date(Date.now() - 301_000).toISOString()
  expectError(await push(gw, src.sign(payload(src.sourceId, { ts }), { timestamp: ts, key: generateCreatorKey() })), 401, 'stale_timestamp')
})

t.test('the signature header is standard base64, canonical: the base64url alphabet and a last character with stray bits are refused with 401 missing_signature', async (t) => {
  // Signatures are random: sign until one holds + or / (nearly every one does).
  let signed = src.sign(payload(src.sourceId))
  while (!/[+/]/.test(signed.headers['x-svc-signature']!)) signed = src.sign(payload(src.sourceId))
  const header = signed.headers['x-svc-signature']!
  const urlSafe = header.replace(/\+/g, '-').replace(/\//g, '_')
  expectError(await push(gw, { ...signed, headers: { ...signed.headers, 'x-svc-signature': urlSafe } }), 401, 'missing_signature', 'base64url')
  // The last character before == carries 2 bits; the next one up decodes to the same 64 bytes.
  const last = header.at(-4)!
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  const stray = `${header.slice(0, -4)}${alphabet[alphabet.indexOf(last) + 1]}==:`
  t.same(Buffer.from(stray.slice(9, -1), 'base64'), Buffer.from(header.slice(9, -1), 'base64'), 'the same bytes, spelled another way')
  expectError(await push(gw, { ...signed, headers: { ...signed.headers, 'x-svc-signature': stray } }), 401, 'missing_signature', 'stray bits')
  t.equal((await push(gw, signed)).status, 202, 'the canonical spelling is accepted')
})

t.test('the timestamp is signed as sent, not as the gateway would write it: without milliseconds, or ending in +00:00', async (t) => {
  const now = new Date(Date.now() - 1000).toISOString()
  for (const timestamp of [`${now.slice(0, 19)}Z`, `${now.slice(0, 23)}+00:00`, `${now.slice(0, 23)}123456Z`]) {
    const res = await push(gw, src.sign(payload(src.sourceId), { timestamp }))
    t.equal(res.status, 202, `${timestamp}: ${JSON.stringify(res.body.error ?? '')}`)
  }
})

t.test('a query string is neither signed nor read: a push signed for the path is accepted with ?via=proxy appended', async (t) => {
  const signed = src.sign(payload(src.sourceId))
  const res = await push(gw, { ...signed, path: `${signed.path}?via=proxy` })
  t.equal(res.status, 202, JSON.stringify(res.body.error ?? ''))
})
