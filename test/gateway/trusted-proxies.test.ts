import t from 'tap'
import { payload, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { proxyV2Header, rawRequest, requestBytes } from '../helpers/raw-http.js'

/** The number of addresses proven for some key (`sgw_proven_addresses` in /metrics). */
async function provenCount(gw: { url: string; adminToken: string }): Promise<number> {
  const page = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).text()
  return Number(/^sgw_proven_addresses (\d+)$/m.exec(page)?.[1])
}

type Source = Awaited<ReturnType<typeof provision>>

/** A fresh signed push of `src` sent raw from `from`, after an optional PROXY v2 header, with extra header lines and payload fields. */
function pushRaw(gw: { port: number }, src: Source, from: string, options: { proxiedFrom?: Buffer; headers?: Array<[string, string]>; fields?: Record<string, unknown> } = {}) {
  const s = src.sign(payload(src.sourceId, options.fields))
  const bytes = requestBytes(s.path, [...Object.entries(s.headers), ...(options.headers ?? []), ['content-length', String(s.body.length)]], s.body)
  const chunks = options.proxiedFrom === undefined ? [bytes] : [Buffer.concat([proxyV2Header(options.proxiedFrom), bytes])]
  return rawRequest(gw.port, chunks, { localAddress: from })
}

const v4 = (text: string) => Buffer.from(text.split('.').map(Number))

t.test('from a trusted proxy the client named by X-Forwarded-For is the address proven; from anyone else it is ignored, and a PROXY header from anyone', async (t) => {
  const gw = await startTestGateway(t, { env: { TRUSTED_PROXIES: '127.0.0.1' } })
  const src = await provision(gw)
  t.equal(await provenCount(gw), 1, 'the test signal came through the proxy naming no one: the proxy itself is proven')

  t.equal((await pushRaw(gw, src, '127.0.0.1', { headers: [['x-forwarded-for', '198.51.100.8']] }))?.status, 202)
  t.equal(await provenCount(gw), 2, 'the X-Forwarded-For client is a new address')
  t.equal((await pushRaw(gw, src, '127.0.0.1', { headers: [['x-forwarded-for', '203.0.113.99, 198.51.100.8']] }))?.status, 202)
  t.equal(await provenCount(gw), 2, 'an address the client prepends is not read: the hop the proxy appended is')
  t.equal((await pushRaw(gw, src, '127.0.0.1', { headers: [['x-forwarded-for', '2001:db8:0:7::1']] }))?.status, 202, 'an IPv6 client')
  t.equal(await provenCount(gw), 3)
  // uWebSockets.js re-reads a PROXY header at every request, so a client behind a TCP proxy could send one: never read.
  t.equal((await pushRaw(gw, src, '127.0.0.1', { proxiedFrom: v4('198.51.100.7') }))?.status, 202)
  t.equal(await provenCount(gw), 3, 'a PROXY header names no one, even on a connection from a trusted proxy')

  // 127.0.0.2 is not a trusted proxy: the first push proves it, and what it claims changes nothing.
  t.equal((await pushRaw(gw, src, '127.0.0.2'))?.status, 202)
  t.equal(await provenCount(gw), 4)
  t.equal((await pushRaw(gw, src, '127.0.0.2', { headers: [['x-forwarded-for', '192.0.2.1']] }))?.status, 202)
  t.equal((await pushRaw(gw, src, '127.0.0.2', { proxiedFrom: v4('192.0.2.2') }))?.status, 202)
  t.equal(await provenCount(gw), 4, 'neither header of an untrusted peer named a new address')
})

t.test('a refusal lists the client it came from: the TCP peer, or the client a trusted proxy names', async (t) => {
  const gw = await startTestGateway(t, { env: { TRUSTED_PROXIES: '127.0.0.1' } })
  const src = await provision(gw)
  // Refused at step 11 (invalid_severity): listed with the key id and signal id, and now the address.
  const refusedFrom = async (from: string, options: { proxiedFrom?: Buffer; headers?: Array<[string, string]> } = {}) => {
    const res = await pushRaw(gw, src, from, { ...options, fields: { severity: 'apocalyptic' } })
    t.equal(res?.body?.error?.code, 'invalid_severity')
    return res?.headers['x-request-id']
  }
  const ids = [
    await refusedFrom('127.0.0.2', { headers: [['x-forwarded-for', '192.0.2.1']] }),
    await refusedFrom('127.0.0.1', { headers: [['x-forwarded-for', '198.51.100.8']] }),
    await refusedFrom('127.0.0.1', { headers: [['x-forwarded-for', '2001:db8:0:7:0:0:0:1']] }),
    await refusedFrom('127.0.0.1', { proxiedFrom: v4('198.51.100.9') }),
  ]
  const listed = await (await fetch(`${gw.url}/v1/byo/sources/${src.sourceId}/ingest-errors`, { headers: { authorization: `Bearer ${src.creatorToken}` } })).json()
  const addressOf = new Map(listed.data.map((r: { request_id: string; client_address: string }) => [r.request_id, r.client_address]))
  t.strictSame(
    ids.map((id) => addressOf.get(id)),
    ['127.0.0.2', '198.51.100.8', '2001:db8:0:7::1', '127.0.0.1'],
    'an untrusted peer as itself; through the proxy, the client it names, or the proxy when it names none (a PROXY header names no one)',
  )
})
