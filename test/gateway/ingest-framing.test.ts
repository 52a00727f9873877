import { sign } from 'node:crypto'
import t, { type Test } from 'tap'
import { signingString } from '../../harness/signed-push.js'
import { payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rawRequest, requestBytes } from '../helpers/raw-http.js'

const gw = await startTestGateway(t, { env: { BODY_TIMEOUT_MS: '500' } })
const src = await provision(gw)
const path = `/v1/byo/sources/${src.sourceId}/signals`

/** Signs arbitrary body bytes; returns the header list for a raw request. */
function signedHeaders(body: Buffer, extra: Array<[string, string]> = [], omitLength = false): Array<[string, string]> {
  const timestamp = new Date().toISOString()
  const nonce = `n-${Math.random().toString(36).slice(2)}`
  const sig = sign(null, Buffer.from(signingString('POST', path, timestamp, nonce, body)), src.key.privateKey).toString('base64')
  const headers: Array<[string, string]> = [
    ['Content-Type', 'application/json'],
    ['X-Svc-Source-Id', src.sourceId],
    ['X-Svc-Key-Id', src.keyId],
    ['X-Svc-Timestamp', timestamp],
    ['X-Svc-Nonce', nonce],
    ['X-Svc-Signature', `ed25519=:${sig}:`],
  ]
  if (!omitLength) headers.push(['Content-Length', String(body.length)])
  return [...headers, ...extra]
}

async function stillServing(t: Test) {
  const res = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202, 'the gateway keeps serving')
}

const refusedRaw = async (t: Test, res: Awaited<ReturnType<typeof rawRequest>>, status: number, code: string) => {
  t.ok(res, 'got a response')
  t.equal(res?.status, status)
  t.equal(res?.body?.error?.code, code, res?.body?.error?.message)
  await stillServing(t)
}

t.test('a signed body that is not valid JSON is refused with 400 invalid_body', async (t) => {
  const body = Buffer.from('{"signal_id": "abcdefgh",')
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)]), 400, 'invalid_body')
})

t.test('a body with a duplicate key is refused with 400 invalid_body', async (t) => {
  const p = payload(src.sourceId)
  const body = Buffer.from(JSON.stringify(p).replace('{', '{"severity":"critical",'))
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)]), 400, 'invalid_body')
})

t.test('a body with a lone surrogate escape is refused with 400 invalid_body', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId, { note: 'X' })).replace('"X"', '"\\ud800"'))
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)]), 400, 'invalid_body')
})

t.test('a confidence written with more digits than a double holds (it would read as 100) is refused with 400 invalid_body', async (t) => {
  for (const numeral of ['100.0000000000000001', '99.99999999999999999', '1e-400']) {
    const body = Buffer.from(JSON.stringify(payload(src.sourceId, { confidence: 7 })).replace('"confidence":7', `"confidence":${numeral}`))
    const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)])
    await refusedRaw(t, res, 400, 'invalid_body')
    t.match(res?.body?.error?.message, /number/, numeral)
  }
})

t.test('a captured request replayed with a byte >= 0x80 appended to its nonce (which uWS trims) is still a replayed nonce', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const headers = signedHeaders(body)
  t.equal((await rawRequest(gw.port, [requestBytes(path, headers, body)]))?.status, 202)
  for (const tail of ['\xff', '\xc3\xa9']) {
    const padded = headers.map(([k, v]): [string, string] => [k, k === 'X-Svc-Nonce' ? v + tail : v])
    const res = await rawRequest(gw.port, [requestBytes(path, padded, body)])
    t.equal(res?.status, 401)
    t.equal(res?.body?.error?.code, 'replayed_nonce', JSON.stringify(tail))
  }
})

t.test('a byte >= 0x80 inside any security header is refused with 401 missing_signature', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  for (const name of ['X-Svc-Source-Id', 'X-Svc-Key-Id', 'X-Svc-Timestamp', 'X-Svc-Nonce', 'X-Svc-Signature']) {
    const spoiled = signedHeaders(body).map(([k, v]): [string, string] => [k, k === name ? `${v.slice(0, 5)}\xc3\xbf${v.slice(5)}` : v])
    await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, spoiled, body)]), 401, 'missing_signature')
  }
})

t.test('headers named like members of Object.prototype are ignored like any other unknown header', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const odd: Array<[string, string]> = [['Constructor', '1'], ['toString', 'x'], ['hasOwnProperty', 'y'], ['valueOf', 'z'], ['isPrototypeOf', 'w']]
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, odd), body)])
  t.equal(res?.status, 202, JSON.stringify(res?.body))
  const unsigned = await rawRequest(gw.port, [requestBytes(`/v1/byo/sources/src_nothing/signals`, [['Constructor', '1'], ['Content-Length', '2']], '{}')])
  t.equal(unsigned?.status, 400, 'refused for what it lacks, not for the header')
  await stillServing(t)
})

t.test('a body that is not UTF-8 is refused with 400 invalid_body', async (t) => {
  const body = Buffer.concat([Buffer.from(JSON.stringify(payload(src.sourceId, { note: 'X' })).split('X')[0]!), Buffer.from([0xc3, 0x28]), Buffer.from('"}')])
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)]), 400, 'invalid_body')
})

t.test('a body of 16,385 bytes is refused with 400 invalid_body before it is read', async (t) => {
  const body = Buffer.alloc(16_385, 0x20)
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)])
  await refusedRaw(t, res, 400, 'invalid_body')
  t.equal(res?.closed, true, 'the connection is closed')
})

t.test('a declared length of 16,385 bytes is refused from the head, before the source ids: invalid_body, not invalid_source_id, and the connection closed', async (t) => {
  const body = Buffer.alloc(16_385, 0x20)
  const headers = signedHeaders(body).map(([k, v]): [string, string] => (k === 'X-Svc-Source-Id' ? [k, 'src_other'] : [k, v]))
  const res = await rawRequest(gw.port, [requestBytes(path, headers, body)])
  await refusedRaw(t, res, 400, 'invalid_body')
  t.equal(res?.closed, true, 'the connection is closed: the body was not read')
})

t.test('a body of exactly 16,384 bytes is read (and judged on its content)', async (t) => {
  const p = JSON.stringify(payload(src.sourceId))
  const body = Buffer.from(p + ' '.repeat(16_384 - p.length))
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)])
  t.equal(res?.status, 202, JSON.stringify(res?.body))
})

t.test('two different Content-Length headers are refused with 400 invalid_body and the connection closed', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, [['Content-Length', String(body.length + 5)]]), body)])
  await refusedRaw(t, res, 400, 'invalid_body')
  t.equal(res?.closed, true)
})

t.test('an empty body is refused with 400 invalid_body before any verification, however its length is spelt', async (t) => {
  for (const length of ['0', '00', '000000000']) {
    const empty = Buffer.alloc(0)
    const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(empty, [['Content-Length', length]], true), empty)])
    await refusedRaw(t, res, 400, 'invalid_body')
    t.equal(res?.body?.error?.message, 'body is empty', `Content-Length: ${length}`)
    t.equal(res?.closed, true)
  }
})

t.test('a missing Content-Length is refused with 400 invalid_body', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, [], true), '')]), 400, 'invalid_body')
})

t.test('Transfer-Encoding is refused with 400 invalid_body and the connection closed', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const chunked = Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')])
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, [['Transfer-Encoding', 'chunked']], true), chunked)])
  await refusedRaw(t, res, 400, 'invalid_body')
  t.equal(res?.closed, true)
})

t.test('Transfer-Encoding beside Content-Length is dropped by the HTTP parser, and the gateway keeps serving', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, [['Transfer-Encoding', 'chunked']]), body)])
  t.not(res?.status, 202, 'never accepted')
  await stillServing(t)
})

t.test('a body sent too slowly is refused with 400 invalid_body and the connection closed', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const bytes = requestBytes(path, signedHeaders(body), body)
  const head = bytes.subarray(0, bytes.length - body.length)
  const res = await rawRequest(gw.port, [head, body.subarray(0, 5), body.subarray(5, 10)], { gapMs: 400, timeoutMs: 3000 })
  await refusedRaw(t, res, 400, 'invalid_body')
  t.equal(res?.closed, true)
})

for (const name of ['X-Svc-Signature', 'X-Svc-Nonce', 'X-Svc-Key-Id', 'X-Svc-Timestamp', 'X-Svc-Source-Id']) {
  t.test(`a repeated ${name} header is refused with 401 missing_signature`, async (t) => {
    const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
    const headers = signedHeaders(body)
    const original = headers.find(([k]) => k === name)!
    const res = await rawRequest(gw.port, [requestBytes(path, [...headers, original], body)])
    await refusedRaw(t, res, 401, 'missing_signature')
  })
}

t.test('a repeated Idempotency-Key header is refused with 400 invalid_body', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body, [['Idempotency-Key', 'idem-aaaa-1'], ['Idempotency-Key', 'idem-bbbb-2']]), body)])
  await refusedRaw(t, res, 400, 'invalid_body')
})

t.test('a missing or repeated Content-Type is refused with 400 invalid_body', async (t) => {
  const body = Buffer.from(JSON.stringify(payload(src.sourceId)))
  const without = signedHeaders(body).filter(([k]) => k !== 'Content-Type')
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, without, body)]), 400, 'invalid_body')
  const twice = signedHeaders(body, [['Content-Type', 'application/json']])
  await refusedRaw(t, await rawRequest(gw.port, [requestBytes(path, twice, body)]), 400, 'invalid_body')
})

t.test('the control plane refuses two Content-Length headers too, and closes the connection', async (t) => {
  const body = JSON.stringify({ role: 'creator', subject: 'x' })
  const res = await rawRequest(gw.port, [
    requestBytes('/v1/admin/tokens', [['Authorization', `Bearer ${gw.adminToken}`], ['Content-Type', 'application/json'], ['Content-Length', String(body.length)], ['Content-Length', String(body.length + 3)]], body),
  ])
  t.equal(res?.status, 400)
  t.equal(res?.body?.error?.code, 'invalid_request')
  t.equal(res?.closed, true)
})

t.test('a Content-Type other than application/json is refused with 400 invalid_body', async (t) => {
  for (const type of ['text/plain', 'application/jsonp', 'application/json-seq', 'application/json; charset=latin1', 'application/json; charset=utf-8; x=1']) {
    const signed = src.sign(payload(src.sourceId))
    const res = await push(gw, { ...signed, headers: { ...signed.headers, 'content-type': type } })
    t.equal(res.status, 400, type)
    t.equal(res.body.error.code, 'invalid_body', type)
  }
  for (const type of ['application/json; charset=utf-8', 'Application/JSON;charset="UTF-8"']) {
    const signed = src.sign(payload(src.sourceId))
    t.equal((await push(gw, { ...signed, headers: { ...signed.headers, 'content-type': type } })).status, 202, type)
  }
})

t.test('GET on the ingest path is 405 and an unknown path is 404, both with error bodies', async (t) => {
  const get = await fetch(`${gw.url}${path}`)
  t.equal(get.status, 405)
  t.equal(get.headers.get('allow'), 'POST')
  t.equal(((await get.json()) as any).error.code, 'method_not_allowed')
  const missing = await fetch(`${gw.url}/v1/nothing`)
  t.equal(missing.status, 404)
  t.equal(((await missing.json()) as any).error.code, 'not_found')
})

t.test('CONNECT gets 405 with Allow on a path the gateway serves and 404 elsewhere; in its authority form, no answer', async (t) => {
  const connectTo = (target: string, timeoutMs?: number) =>
    rawRequest(gw.port, [`CONNECT ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`], timeoutMs === undefined ? {} : { timeoutMs })
  const ingest = await connectTo(path)
  t.equal(ingest?.status, 405, 'the ingest path')
  t.equal(ingest?.headers['allow'], 'POST')
  t.equal(ingest?.body?.error?.code, 'method_not_allowed')
  t.equal(ingest?.closed, true, 'and the connection closes')
  const list = await connectTo('/v1/rentals')
  t.equal(list?.status, 405, 'a control-plane path')
  t.equal(list?.headers['allow'], 'GET, HEAD')
  const missing = await connectTo('/v1/nothing')
  t.equal(missing?.status, 404, 'a path that does not exist')
  t.equal(missing?.body?.error?.code, 'not_found')
  t.equal(missing?.closed, true)
  // `CONNECT host:port`, what a client asking for a tunnel sends: the parser drops it, like an absolute-form target.
  t.equal(await connectTo('127.0.0.1:443', 500), undefined, 'no answer within 500 ms')
  await stillServing(t)
})

t.test('a flood of malformed requests never produces a 500', async (t) => {
  const bodies = ['', '[]', 'null', '"str"', '{}', '{"a":', '\u0000', '{"signal_id":{}}', '{"signal_id":"abcdefgh","source_id":null}']
  for (const b of bodies) {
    const body = Buffer.from(b)
    const res = await rawRequest(gw.port, [requestBytes(path, signedHeaders(body), body)])
    t.ok(res !== undefined && res.status >= 400 && res.status < 500, `${JSON.stringify(b)} → ${res?.status} ${res?.body?.error?.code}`)
  }
  await stillServing(t)
})

t.test('a refusal before the body is read keeps the connection: the next request on it is served', async (t) => {
  const { connect } = await import('node:net')
  const bad = src.sign(payload(src.sourceId), { keyId: 'key_unknown' })
  const good = src.sign(payload(src.sourceId))
  const asBytes = (s: typeof bad) => requestBytes(s.path, [...Object.entries(s.headers), ['content-length', String(s.body.length)]] as Array<[string, string]>, s.body)
  const socket = connect(gw.port, '127.0.0.1')
  let text = ''
  socket.on('data', (d: Buffer) => (text += d.toString('latin1')))
  socket.write(Buffer.concat([asBytes(bad), asBytes(good)]))
  const deadline = Date.now() + 3000
  while ((text.match(/HTTP\/1\.1 /g) ?? []).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  socket.destroy()
  const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => m[1])
  t.same(statuses, ['401', '202'])
})
