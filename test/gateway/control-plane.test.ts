import { connect, type Socket } from 'node:net'
import t from 'tap'
import { call, MANIFEST, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rawRequest } from '../helpers/raw-http.js'
import { storedRegistryText } from '../helpers/stored-registry.js'

const gw = await startTestGateway(t)

t.test('admin endpoints need the admin token', async (t) => {
  const none = await call(gw.url, 'POST', '/v1/admin/tokens', { body: { role: 'creator', subject: 'c1' } })
  t.equal(none.status, 401)
  t.equal(none.body.error.code, 'unauthorized')
  const challenged = await fetch(`${gw.url}/v1/admin/tokens`, { method: 'POST', body: '{}' })
  t.equal(challenged.headers.get('www-authenticate'), 'Bearer', 'a 401 says which scheme it wants')
  const wrong = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken + 'x', body: { role: 'creator', subject: 'c1' } })
  t.equal(wrong.status, 401)
  const src = await provision(gw)
  const creator = await call(gw.url, 'POST', '/v1/admin/agents', { token: src.creatorToken, body: { agent_id: 'a', creator_id: 'c', slots: 1 } })
  t.equal(creator.status, 403)
  t.equal(creator.body.error.code, 'forbidden')
})

t.test('another method on a control-plane path is 405 with Allow, not the 404 of a path that does not exist', async (t) => {
  for (const [method, path, allow] of [
    ['PUT', '/v1/admin/agents', 'POST, GET, HEAD'],
    ['GET', '/v1/admin/tokens/tok_x/revoke', 'POST'],
    ['DELETE', '/v1/admin/agents/a', 'PATCH'],
    ['GET', '/v1/byo/sources/src_x/keys/key_y/promote', 'POST'],
    ['PUT', '/v1/byo/sources/src_x', 'GET, HEAD, PATCH'],
    ['POST', '/v1/byo/sources/src_x/ingest-errors', 'GET, HEAD'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['DELETE', '/readyz', 'GET, HEAD'],
    ['POST', '/metrics', 'GET, HEAD'],
    ['PUT', '/v1/openapi.json', 'GET, HEAD'],
    ['GET', '/v1/byo/sources/src_x/signals', 'POST'],
  ] as const) {
    const res = await fetch(`${gw.url}${path}`, { method, headers: { authorization: `Bearer ${gw.adminToken}` } })
    t.equal(res.status, 405, `${method} ${path}`)
    t.equal(res.headers.get('allow'), allow, `${method} ${path} allows ${allow}`)
    t.equal(((await res.json()) as any).error.code, 'method_not_allowed')
  }
  const keys = await fetch(`${gw.url}/v1/byo/sources/src_x/keys`, { method: 'DELETE' })
  t.equal(keys.status, 405)
  t.same(keys.headers.get('allow')?.split(', ').sort(), ['GET', 'HEAD', 'POST'])
  t.equal((await fetch(`${gw.url}/v1/admin/nothing`)).status, 404)
})

/** Sends the requests pipelined on one connection and returns everything the gateway wrote, up to `settleMs` of quiet. */
function exchange(requests: string[], settleMs = 300): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(gw.port, '127.0.0.1', () => socket.write(requests.join('')))
    let text = ''
    let timer = setTimeout(() => socket.destroy(), settleMs)
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1')
      clearTimeout(timer)
      timer = setTimeout(() => socket.destroy(), settleMs)
    })
    socket.on('error', reject)
    socket.on('close', () => resolve(text))
  })
}

t.test('HEAD answers like GET without a body, so the next response on the connection still parses', async (t) => {
  const auth = `Authorization: Bearer ${gw.adminToken}\r\n`
  for (const [path, status] of [
    ['/healthz', 200],
    ['/readyz', 200],
    ['/v1/openapi.json', 200],
    [`/metrics`, 200],
    ['/v1/byo/sources/src_nothing', 404],
    ['/v1/byo/sources/src_x/signals', 405],
    ['/v1/admin/tokens/tok_x/revoke', 405],
    ['/no/such/path', 404],
  ] as const) {
    const head = await exchange([`HEAD ${path} HTTP/1.1\r\nHost: x\r\n${auth}\r\n`, `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`])
    const get = await fetch(`${gw.url}${path}`, { method: path.endsWith('/signals') || path.endsWith('/revoke') ? 'PUT' : 'GET', headers: { authorization: `Bearer ${gw.adminToken}` } })
    const getBody = await get.text()
    const [first, ...rest] = head.split('HTTP/1.1 ').filter((part) => part !== '')
    t.match(first, new RegExp(`^${status} `), `HEAD ${path}: ${status}`)
    const [headers, body] = (first ?? '').split('\r\n\r\n')
    t.equal(body, '', `HEAD ${path}: no body`)
    // /metrics and /readyz change between two requests (counters, the recorder's progress): their length is checked present, not equal.
    if (status === 200 && path !== '/metrics' && path !== '/readyz') t.match(headers, new RegExp(`content-length: ${Buffer.byteLength(getBody)}\\r`, 'i'), `HEAD ${path}: the length GET would send`)
    if (path === '/readyz') t.match(headers, /content-length: \d+\r/i, 'HEAD /readyz: a length')
    // A refusal may close the connection (as it does for every method); an answer keeps it.
    if (status === 200) t.equal(rest.length, 1, `HEAD ${path}: the pipelined GET behind it is answered`)
    else t.ok(rest.length <= 1, `HEAD ${path}: at most the pipelined GET follows`)
    for (const next of rest) t.match(next, /^200 OK[\s\S]*\{"ok":true,"data":\{"status":"alive"\}\}$/, `HEAD ${path}: and it parses whole`)
  }
})

t.test('HEAD refused for its token (401, 403) has the status and Content-Length of the GET, and keeps the connection', async (t) => {
  const src = await provision(gw)
  for (const [why, token, status] of [
    ['no token', undefined, 401],
    ['a wrong token', `${gw.adminToken}x`, 401],
    ['a creator token on an admin path', src.creatorToken, 403],
  ] as const) {
    const headers: Record<string, string> = token === undefined ? {} : { authorization: `Bearer ${token}` }
    const get = await fetch(`${gw.url}/v1/admin/tokens`, { headers })
    const length = Buffer.byteLength(await get.text())
    const auth = token === undefined ? '' : `Authorization: Bearer ${token}\r\n`
    const head = await exchange([`HEAD /v1/admin/tokens HTTP/1.1\r\nHost: x\r\n${auth}\r\n`, `GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n`])
    const [first, ...rest] = head.split('HTTP/1.1 ').filter((part) => part !== '')
    t.equal(get.status, status, `GET, ${why}`)
    t.match(first, new RegExp(`^${status} [\\s\\S]*content-length: ${length}\\r\\n([\\s\\S]*\\r\\n)?\\r\\n$`, 'i'), `HEAD, ${why}: ${status} with the GET's length, no body`)
    t.equal(rest.length, 1, `HEAD, ${why}: the pipelined GET behind it is answered`)
  }
})

t.test('requests without a valid token write no log line each, and a logged path is clipped', async (t) => {
  const before = gw.output.join('\n').length
  const long = `/v1/byo/sources/${'A'.repeat(20_000)}`
  for (let i = 0; i < 50; i++) t.equal((await fetch(`${gw.url}${long}`)).status, 401)
  await new Promise((r) => setTimeout(r, 200))
  t.ok(gw.output.join('\n').length - before < 5_000, `50 unauthenticated requests with 20 KB paths added ${gw.output.join('\n').length - before} bytes of log`)
  const res = await fetch(`${gw.url}${long}`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  t.equal(res.status, 404)
  const requestId = res.headers.get('x-request-id')
  await new Promise((r) => setTimeout(r, 200))
  const line = gw.output.find((l) => l.includes(`"${requestId}"`) && l.includes('control request'))
  t.ok(line, 'an authenticated request is logged')
  t.ok((line ?? '').length < 1_000, 'with its path clipped')
})

t.test('a token is shown once and stored only as a hash', async (t) => {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'renter-1' } })
  t.equal(res.status, 201)
  t.equal(res.body.ok, true)
  const token = res.body.data.token as string
  t.match(token, /^sgw_/)
  const stored = await storedRegistryText(gw)
  t.notOk(stored.includes(token), 'the token is not in the registry bucket')
  const { createHash } = await import('node:crypto')
  t.ok(stored.includes(createHash('sha256').update(token).digest('hex')), 'its SHA-256 is')
})

t.test('paging through the live tokens while revoking each one reaches them all: a cursor whose token was revoked meanwhile still counts', async (t) => {
  const subject = `revoke-all-${Date.now()}`
  const made: string[] = []
  for (let i = 0; i < 4; i++) made.push((await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject } })).body.data.token_id)
  const seen: string[] = []
  let cursor: string | null = null
  for (let pages = 0; pages < 10; pages++) {
    const page: any = await call(gw.url, 'GET', `/v1/admin/tokens?subject=${subject}&state=live&limit=1${cursor === null ? '' : `&cursor=${cursor}`}`, { token: gw.adminToken })
    t.equal(page.status, 200, `page ${pages + 1}`)
    for (const r of page.body.data) {
      seen.push(r.token_id)
      t.equal((await call(gw.url, 'POST', `/v1/admin/tokens/${r.token_id}/revoke`, { token: gw.adminToken })).status, 200)
    }
    cursor = page.body.next_cursor
    if (cursor === null) break
  }
  t.same(seen, made, 'every token, in order, each once')
  const live = await call(gw.url, 'GET', `/v1/admin/tokens?subject=${subject}&state=live`, { token: gw.adminToken })
  t.same(live.body.data, [])
})

t.test('the admin lists tokens without their hashes, filters them, and pages through them', async (t) => {
  const subject = `lister-${Date.now()}`
  const made = []
  for (let i = 0; i < 3; i++) made.push((await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })).body.data)
  t.same(Object.keys(made[0]).sort(), ['created_at', 'revoked_at', 'role', 'subject', 'token', 'token_id'])
  const first = await call(gw.url, 'GET', `/v1/admin/tokens?subject=${subject}&limit=2`, { token: gw.adminToken })
  t.equal(first.status, 200)
  t.same(first.body.data.map((r: any) => r.token_id), made.slice(0, 2).map((m) => m.token_id), 'oldest first')
  t.notOk(JSON.stringify(first.body).includes(made[0].token), 'no token in a listing')
  t.same(Object.keys(first.body.data[0]).sort(), ['created_at', 'revoked_at', 'role', 'subject', 'token_id'], 'and no hash')
  t.equal(first.body.next_cursor, `${made[1].token_id}.${Date.parse(made[1].created_at)}`, 'the cursor names the last token listed and its time')
  const second = await call(gw.url, 'GET', `/v1/admin/tokens?subject=${subject}&limit=2&cursor=${first.body.next_cursor}`, { token: gw.adminToken })
  t.same(second.body.data.map((r: any) => r.token_id), [made[2].token_id])
  t.equal(second.body.next_cursor, null)
  t.equal((await call(gw.url, 'GET', `/v1/admin/tokens?subject=${subject}&role=creator`, { token: gw.adminToken })).body.data.length, 0, 'filtered by role')
  const one = await call(gw.url, 'GET', `/v1/admin/tokens/${made[1].token_id}`, { token: gw.adminToken })
  t.same(one.body.data, { token_id: made[1].token_id, role: 'renter', subject, created_at: made[1].created_at, revoked_at: null })
  for (const query of ['role=admin', 'state=dead', 'limit=0', 'cursor=tok_forged', 'cursor=tok_forged.12x']) {
    const bad = await call(gw.url, 'GET', `/v1/admin/tokens?${query}`, { token: gw.adminToken })
    t.equal(bad.status, 400, query)
    t.equal(bad.body.error.code, 'invalid_request', query)
  }
  t.equal((await call(gw.url, 'GET', '/v1/admin/tokens/tok_nothing', { token: gw.adminToken })).status, 404)
  const src = await provision(gw)
  for (const [method, path] of [['GET', '/v1/admin/tokens'], ['GET', `/v1/admin/tokens/${made[0].token_id}`], ['POST', `/v1/admin/tokens/${made[0].token_id}/revoke`]] as const) {
    t.equal((await call(gw.url, method, path, { token: src.creatorToken })).status, 403, `${method} ${path} is the admin's`)
  }
})

t.test('a revoked token is refused from its next request on, and revoking it again is harmless', async (t) => {
  const src = await provision(gw)
  const tokens = await call(gw.url, 'GET', '/v1/admin/tokens?role=creator&state=live', { token: gw.adminToken })
  const mine = tokens.body.data.filter((r: any) => r.subject === src.creatorId)
  t.equal(mine.length, 1, 'the creator token is found by its subject')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })).status, 200)
  const revoked = await call(gw.url, 'POST', `/v1/admin/tokens/${mine[0].token_id}/revoke`, { token: gw.adminToken })
  t.equal(revoked.status, 200)
  t.type(revoked.body.data.revoked_at, 'string')
  const refused = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })
  t.equal(refused.status, 401)
  t.equal(refused.body.error.code, 'unauthorized')
  const again = await call(gw.url, 'POST', `/v1/admin/tokens/${mine[0].token_id}/revoke`, { token: gw.adminToken })
  t.equal(again.status, 200)
  t.equal(again.body.data.revoked_at, revoked.body.data.revoked_at)
  const listed = await call(gw.url, 'GET', `/v1/admin/tokens?subject=${src.creatorId}&state=revoked`, { token: gw.adminToken })
  t.same(listed.body.data.map((r: any) => r.token_id), [mine[0].token_id])
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'ingest is signed by keys, not tokens: the source keeps pushing')
  t.equal((await call(gw.url, 'POST', '/v1/admin/tokens/tok_nothing/revoke', { token: gw.adminToken })).status, 404)
})

t.test('a request whose body is still arriving when its token is revoked is refused', async (t) => {
  const src = await provision(gw)
  const { token_id } = (await call(gw.url, 'GET', `/v1/admin/tokens?subject=${src.creatorId}`, { token: gw.adminToken })).body.data[0]
  const body = JSON.stringify({ agent_id: src.agentId, manifest: MANIFEST })
  const socket = connect(gw.port, '127.0.0.1')
  let answer = ''
  socket.on('data', (d: Buffer) => (answer += d.toString('latin1')))
  await new Promise((resolve) => socket.once('connect', resolve))
  socket.write(`POST /v1/byo/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${src.creatorToken}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`)
  await new Promise((r) => setTimeout(r, 100))
  t.equal((await call(gw.url, 'POST', `/v1/admin/tokens/${token_id}/revoke`, { token: gw.adminToken })).status, 200)
  socket.write(body.slice(10))
  for (let waited = 0; !answer.includes('"request_id"') && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20))
  socket.destroy()
  t.match(answer, /^HTTP\/1\.1 401 /, 'refused')
  t.match(answer, /"code":"unauthorized"/)
  const agent = await call(gw.url, 'GET', `/v1/byo/agents/${src.agentId}`, { token: gw.adminToken })
  t.equal(agent.body.data.slots_used, 1, 'and no source was created')
})

t.test('a token request with an unknown role or field is refused with 400 naming the field', async (t) => {
  const bad = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'god', subject: 'x' } })
  t.equal(bad.status, 400)
  t.match(bad.body.error.message, /role/)
  const extra = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'creator', subject: 'x', admin: true } })
  t.equal(extra.status, 400)
  t.match(extra.body.error.message, /admin/)
})

t.test('a source takes one slot; with none free the creator gets 409 no_open_slot', async (t) => {
  const src = await provision(gw, { slots: 1 })
  const res = await call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: { agent_id: src.agentId, manifest: MANIFEST } })
  t.equal(res.status, 409)
  t.equal(res.body.error.code, 'no_open_slot')
})

t.test('a source registration returns the source id and the ingest endpoint', async (t) => {
  const src = await provision(gw, { activate: false })
  const res = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })
  t.equal(res.status, 200)
  t.equal(res.body.data.source_id, src.sourceId)
  t.equal(res.body.data.ingest_endpoint, `http://localhost:${gw.port}/v1/byo/sources/${src.sourceId}/signals`)
  t.same(res.body.data.manifest, MANIFEST)
  t.equal(res.body.data.flagged_for_review, false)
})

t.test('a listing left out or without public_receipts takes its default; a null listing is refused', async (t) => {
  const src = await provision(gw, { slots: 4 })
  const create = (listing: unknown) =>
    call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: listing === undefined ? { agent_id: src.agentId, manifest: MANIFEST } : { agent_id: src.agentId, manifest: MANIFEST, listing } })
  for (const [listing, expected] of [[undefined, false], [{}, false], [{ public_receipts: true }, true]] as const) {
    const res = await create(listing)
    t.equal(res.status, 201, JSON.stringify(listing))
    t.equal(res.body.data.listing.public_receipts, expected, JSON.stringify(listing))
  }
  for (const listing of [null, [], { public_receipts: 'yes' }, { other: 1 }]) {
    const res = await create(listing)
    t.equal(res.status, 400, JSON.stringify(listing))
    t.equal(res.body.error.code, 'invalid_request', JSON.stringify(listing))
  }
})

t.test('an id a path cannot carry (. or ..) is refused; an id with a colon is reached percent-encoded too', async (t) => {
  const creatorId = `colon-${Date.now()}`
  for (const agentId of ['.', '..']) {
    const res = await call(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: agentId, creator_id: creatorId, slots: 1 } })
    t.equal(res.status, 400, agentId)
    t.equal(res.body.error.code, 'invalid_request', agentId)
  }
  t.equal((await call(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: '...', creator_id: creatorId, slots: 1 } })).status, 201, 'three dots are no path segment of their own')
  const agentId = `team:${creatorId}`
  t.equal((await call(gw.url, 'POST', '/v1/admin/agents', { token: gw.adminToken, body: { agent_id: agentId, creator_id: creatorId, slots: 1 } })).status, 201)
  const plain = await call(gw.url, 'GET', `/v1/byo/agents/${agentId}`, { token: gw.adminToken })
  const encoded = await call(gw.url, 'GET', `/v1/byo/agents/${encodeURIComponent(agentId)}`, { token: gw.adminToken })
  t.equal(plain.status, 200)
  t.equal(encoded.status, 200, 'encodeURIComponent')
  t.equal(encoded.body.data.agent_id, agentId)
  t.equal((await call(gw.url, 'GET', '/v1/byo/agents/team%3', { token: gw.adminToken })).status, 404, 'a segment that does not decode names nothing')
})

t.test('a bad manifest is refused with 400 invalid_manifest naming the field', async (t) => {
  const src = await provision(gw, { slots: 5 })
  const cases: Array<[unknown, RegExp]> = [
    [undefined, /manifest is required/],
    [null, /manifest/],
    [{ ...MANIFEST, severity_levels: [] }, /severity_levels/],
    [{ ...MANIFEST, severity_levels: ['a', 'a'] }, /severity_levels/],
    [{ ...MANIFEST, max_rate: { rate: 10, per: 'day' } }, /max_rate\.per/],
    [{ ...MANIFEST, schema_version: '2.0' }, /schema_version/],
    [{ ...MANIFEST, coverage: { chains: ['dogechain'] } }, /coverage\.chains/],
    [{ ...MANIFEST, contact: undefined }, /contact/],
    [{ ...MANIFEST, secret_sauce: 'x' }, /secret_sauce/],
    // Named before the validator lists its errors: listing them (uniqueItems pairwise)
    // for 20,000 items held the event loop for seconds.
    [{ ...MANIFEST, severity_levels: Array.from({ length: 20_000 }, () => []) }, /severity_levels has too many items/],
  ]
  for (const [manifest, field] of cases) {
    const res = await call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: { agent_id: src.agentId, manifest } })
    t.equal(res.status, 400)
    t.equal(res.body.error.code, 'invalid_manifest')
    t.match(res.body.error.message, field)
  }
})

t.test('a max_rate above the operator ceiling (INGEST_MAX_RATE_PER_S, INGEST_MAX_BURST) is refused with 400 invalid_manifest', async (t) => {
  const src = await provision(gw, { slots: 8 })
  const create = (max_rate: unknown) => call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: { agent_id: src.agentId, manifest: { ...MANIFEST, max_rate } } })
  const refused: Array<[unknown, RegExp]> = [
    [{ rate: 1001, per: 'second' }, /manifest\.max_rate: 1001 per second is above this gateway's ceiling of 1000 per second/],
    [{ rate: 60_060, per: 'minute', burst: 10 }, /manifest\.max_rate: 60060 per minute .* ceiling of 1000 per second/],
    [{ rate: 100, per: 'second', burst: 10_001 }, /manifest\.max_rate\.burst: 10001 is above .* 10000/],
    [{ rate: 20_000, per: 'hour' }, /manifest\.max_rate\.burst: 20000 \(the rate, as no burst is given\)/],
    [{ rate: 3_600_001, per: 'hour', burst: 10 }, /manifest\.max_rate: 3600001 per hour .* ceiling of 1000 per second/],
  ]
  for (const [maxRate, message] of refused) {
    const res = await create(maxRate)
    t.equal(res.status, 400, JSON.stringify(maxRate))
    t.equal(res.body.error.code, 'invalid_manifest')
    t.match(res.body.error.message, message)
  }
  // The ceiling is a rate per second whatever the period: an hourly rate above 100,000 can be below it.
  for (const atCeiling of [{ rate: 1000, per: 'second', burst: 10_000 }, { rate: 60_000, per: 'minute', burst: 10 }, { rate: 3_600_000, per: 'hour', burst: 10 }, { rate: 100_001, per: 'hour', burst: 100 }]) {
    t.equal((await create(atCeiling)).status, 201, `${JSON.stringify(atCeiling)} is at the ceiling`)
  }
})

t.test('another creator cannot see or use a source, and gets the same 404 as for a missing one', async (t) => {
  const a = await provision(gw)
  const b = await provision(gw)
  const theirs = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: b.creatorToken })
  const missing = await call(gw.url, 'GET', `/v1/byo/sources/src_missing`, { token: b.creatorToken })
  t.equal(theirs.status, 404)
  t.equal(missing.status, 404)
  t.equal(theirs.body.error.message, missing.body.error.message)
  const onTheirAgent = await call(gw.url, 'POST', '/v1/byo/sources', { token: b.creatorToken, body: { agent_id: a.agentId, manifest: MANIFEST } })
  t.equal(onTheirAgent.status, 404)
  const errors = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/ingest-errors`, { token: b.creatorToken })
  t.equal(errors.status, 404)
})

t.test('an agent and its sources: slots used, pages oldest first, and no view of another creator agent', async (t) => {
  const a = await provision(gw, { slots: 3 })
  const more = []
  for (let i = 0; i < 2; i++) more.push((await call(gw.url, 'POST', '/v1/byo/sources', { token: a.creatorToken, body: { agent_id: a.agentId, manifest: MANIFEST } })).body.data.source_id)
  const agent = await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: a.creatorToken })
  t.equal(agent.status, 200)
  t.match(agent.body.data, { agent_id: a.agentId, slots: 3, slots_used: 3, open_slots: 0 })
  const first = await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources?limit=2`, { token: a.creatorToken })
  t.same(first.body.data.map((s: { source_id: string }) => s.source_id), [a.sourceId, more[0]])
  t.match(first.body.data[0], { ingest_endpoint: new RegExp(`/v1/byo/sources/${a.sourceId}/signals$`), manifest: MANIFEST })
  const second = await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources?limit=2&cursor=${first.body.next_cursor}`, { token: a.creatorToken })
  t.same(second.body.data.map((s: { source_id: string }) => s.source_id), [more[1]])
  t.equal(second.body.next_cursor, null)
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources?cursor=src_forged`, { token: a.creatorToken })).status, 400)
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources?limit=201`, { token: a.creatorToken })).status, 400)
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources`, { token: gw.adminToken })).body.data.length, 3, 'the admin sees them')

  const b = await provision(gw)
  const theirs = await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources`, { token: b.creatorToken })
  const missing = await call(gw.url, 'GET', `/v1/byo/agents/no-such-agent/sources`, { token: b.creatorToken })
  t.equal(theirs.status, 404)
  t.same([theirs.body.error.code, theirs.body.error.message], [missing.body.error.code, missing.body.error.message])
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: b.creatorToken })).status, 404)
})

t.test('a source whose creation answer was lost with the connection can be found again in its agent list', async (t) => {
  const a = await provision(gw, { slots: 2 })
  const body = JSON.stringify({ agent_id: a.agentId, manifest: MANIFEST })
  // A request pipelined behind the POST makes uWS close the connection while the POST
  // waits for the registry write: the source is created, its answer never sent.
  const post = `POST /v1/byo/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.creatorToken}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  await exchange([post, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'])
  // The connection is gone before the registry's writes land: look until they have (5 s at most).
  const list = () => call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources`, { token: a.creatorToken })
  let listed = await list()
  for (const deadline = Date.now() + 5000; listed.body.data.length < 2 && Date.now() < deadline; listed = await list()) await new Promise((r) => setTimeout(r, 20))
  t.equal(listed.body.data.length, 2, 'the created source is listed, whether or not its answer arrived')
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: a.creatorToken })).body.data.open_slots, 0)
})

t.test('a renter token cannot register sources or read ingest errors', async (t) => {
  const a = await provision(gw)
  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'r1' } })).body.data.token
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/ingest-errors`, { token: renter })).status, 403)
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: renter })).status, 403)
  t.equal((await call(gw.url, 'POST', '/v1/byo/sources', { token: renter, body: { agent_id: a.agentId, manifest: MANIFEST } })).status, 403)
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources`, { token: renter })).status, 403)
})

t.test('a repeated Authorization header is refused with 401, whichever value comes first', async (t) => {
  const head = (a: string, b: string) => `GET /v1/openapi.json HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a}\r\nAuthorization: Bearer ${b}\r\n\r\n`
  for (const [a, b] of [[gw.adminToken, 'wrong'], ['wrong', gw.adminToken], [gw.adminToken, gw.adminToken]]) {
    const res = await rawRequest(gw.port, [head(a!, b!).replace('GET /v1/openapi.json', 'GET /v1/byo/sources/src_x')])
    t.equal(res?.status, 401, `${a === gw.adminToken ? 'admin' : 'wrong'} then ${b === gw.adminToken ? 'admin' : 'wrong'}`)
  }
})

t.test('ingest errors are cursor-paginated newest first', async (t) => {
  const src = await provision(gw)
  for (let i = 0; i < 5; i++) await push(gw, src.sign(payload(src.sourceId, { severity: `bad${i}` })))
  const seen: string[] = []
  let cursor: string | null = null
  let pages = 0
  do {
    const q: string = cursor === null ? '?limit=2' : `?limit=2&cursor=${cursor}`
    const res = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors${q}`, { token: src.creatorToken })
    t.equal(res.status, 200)
    t.ok(res.body.data.length <= 2)
    seen.push(...res.body.data.map((e: any) => e.request_id))
    cursor = res.body.next_cursor
    pages++
  } while (cursor !== null && pages < 10)
  t.equal(seen.length, 5)
  t.equal(new Set(seen).size, 5, 'no repeats across pages')
  const all = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors`, { token: src.creatorToken })
  t.same(all.body.data.map((e: any) => e.request_id), seen, 'pages concatenate to the full list')
  t.equal(all.body.data[0].code, 'invalid_severity')
  t.equal(all.body.data[0].status, 400)
  t.equal(all.body.data[0].key_id, src.keyId)
  t.match(all.body.data[0].signal_id, /^sig_/)
  for (const limit of ['0', '201', '1e2', '0x10', '%205', '2.0', 'two']) {
    t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?limit=${limit}`, { token: src.creatorToken })).status, 400, `limit ${limit}`)
  }
  for (const forged of ['zzz', ' 5 ', '0x10', '05', '-1']) {
    const cursor = forged === 'zzz' ? forged : Buffer.from(forged).toString('base64url')
    t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/ingest-errors?cursor=${cursor}`, { token: src.creatorToken })).status, 400, `cursor ${forged}`)
  }
})

t.test('an ingest-errors cursor counts that source only: it says nothing of other sources refusals', async (t) => {
  const mine = await provision(gw)
  const other = await provision(gw)
  // The other source's refusals come first and in between: a shared counter would show them.
  for (let i = 0; i < 20; i++) await push(gw, other.sign(payload(other.sourceId, { severity: `bad${i}` })))
  for (let i = 0; i < 3; i++) await push(gw, mine.sign(payload(mine.sourceId, { severity: `bad${i}` })))
  await new Promise((r) => setTimeout(r, 50))
  const first = await call(gw.url, 'GET', `/v1/byo/sources/${mine.sourceId}/ingest-errors?limit=2`, { token: mine.creatorToken })
  for (let i = 0; i < 20; i++) await push(gw, other.sign(payload(other.sourceId, { severity: `bad${i}` })))
  const again = await call(gw.url, 'GET', `/v1/byo/sources/${mine.sourceId}/ingest-errors?limit=2`, { token: mine.creatorToken })
  t.equal(again.body.next_cursor, first.body.next_cursor, 'unchanged by another source refusals')
  // A number made from the record's own time (1,024 per millisecond), rising within the source.
  const n = Number(Buffer.from(first.body.next_cursor, 'base64url').toString())
  t.equal(Math.floor(n / 1024), Date.parse(first.body.data[1].time), 'the number of the last record listed, from its time')
})

t.test('control-plane bodies that are not strict JSON are refused with 400', async (t) => {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', {
    token: gw.adminToken,
    rawBody: Buffer.from('{"role":"creator","role":"renter","subject":"x"}'),
    headers: { 'content-type': 'application/json' },
  })
  t.equal(res.status, 400)
  t.equal(res.body.error.code, 'invalid_request')
  t.equal(res.body.error.message, 'body is not valid JSON: duplicate key "role"', 'the reason, said once')
  const bad = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, rawBody: Buffer.from('{"role":'), headers: { 'content-type': 'application/json' } })
  t.equal(bad.body.error.message, 'body is not valid JSON: syntax error')
  // A body that is JSON but no object: null is not the left-out body that optional bodies allow.
  const { sourceId } = await provision(gw)
  const keyId = (await call(gw.url, 'GET', `/v1/byo/sources/${sourceId}/keys`, { token: gw.adminToken })).body.data[0].key_id
  for (const raw of ['null', '[]', '"x"', '1', '{"reason":"leaked"}']) {
    const res = await call(gw.url, 'POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/revoke`, { token: gw.adminToken, rawBody: Buffer.from(raw), headers: { 'content-type': 'application/json' } })
    t.equal(res.status, 400, raw)
    t.equal(res.body.error.code, 'invalid_request', raw)
  }
  const key = (await call(gw.url, 'GET', `/v1/byo/sources/${sourceId}/keys`, { token: gw.adminToken })).body.data[0]
  t.not(key.state, 'revoked', 'and the key is not revoked')
  const empty = await call(gw.url, 'POST', `/v1/byo/sources/${sourceId}/keys/${keyId}/revoke`, { token: gw.adminToken, rawBody: Buffer.from('{}'), headers: { 'content-type': 'application/json' } })
  t.equal(empty.body.data?.state, 'revoked', 'an empty object is no input')
})

t.test('the OpenAPI document lists every route, and each one it lists is served', async (t) => {
  const res = await call(gw.url, 'GET', '/v1/openapi.json')
  t.equal(res.status, 200)
  t.equal(res.body.openapi, '3.1.0')
  t.same(res.body.components.schemas.SignalPayload.required.sort(), ['severity', 'signal_id', 'source_id', 'token', 'ts'])
  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'openapi-probe' } })).body.data.token
  for (const [path, ops] of Object.entries<Record<string, { security?: unknown; requestBody?: unknown; responses: Record<string, unknown> }>>(res.body.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      const url = gw.url + path.replace(/\{[a-z_]+\}/g, 'x')
      const probe = await fetch(url, { method: method.toUpperCase() })
      // A public route answers a missing thing 404 too: what an unrouted path says tells them apart.
      const unrouted = probe.status === 404 && ((await probe.json()) as { error: { message: string } }).error.message === 'no such endpoint'
      t.notOk(unrouted, `${method} ${path} is routed`)
      t.not(probe.status, 405, `${method} ${path} is routed`)
      if (op.security === undefined) continue
      // Every answer a bearer route gives for the caller's role or the body's framing is listed.
      const documented = Object.keys(op.responses)
      // A route that also lets the public in (an empty security requirement) answers without a token as for the public.
      if (!(op.security as object[]).some((s) => Object.keys(s).length === 0)) t.equal(probe.status, 401, `${method} ${path} without a token`)
      const asRenter = await fetch(url, { method: method.toUpperCase(), headers: { authorization: `Bearer ${renter}` } })
      t.ok(documented.includes(String(asRenter.status)), `${method} ${path} answers a renter ${asRenter.status}, which is listed`)
      for (const status of ['401', '403', '503', ...(op.requestBody === undefined ? [] : ['400', '413'])]) t.ok(documented.includes(status), `${method} ${path} lists ${status}`)
    }
  }
})

t.test('metrics: admin only, Prometheus text, counting accepts, refusals and accept latency without any ids', async (t) => {
  const src = await provision(gw)
  await push(gw, src.sign(payload(src.sourceId)))
  await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' })))
  t.equal((await fetch(`${gw.url}/metrics`)).status, 401)
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${src.creatorToken}` } })).status, 403)
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `bearer ${src.creatorToken}` } })).status, 403, 'the scheme is case-insensitive')
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `BEARER ${gw.adminToken}` } })).status, 200)
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken.toUpperCase()}` } })).status, 401, 'the token is not')
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer   ${gw.adminToken}` } })).status, 200, 'one or more spaces after the scheme (RFC 6750: 1*SP)')
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer\t${gw.adminToken}` } })).status, 401, 'a tab is no separator')
  t.equal((await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer${gw.adminToken}` } })).status, 401, 'nor is nothing')
  const res = await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/plain/)
  const text = await res.text()
  const value = (line: string) => Number(text.split('\n').find((l) => l.startsWith(line))?.slice(line.length + 1))
  t.ok(value('sgw_ingest_accepted_total{deduplicated="false"}') >= 2, 'accepts counted (test signals included)')
  t.ok(value('sgw_ingest_refused_total{code="invalid_severity"}') >= 1)
  t.equal(value('sgw_ingest_accept_latency_seconds_count'), value('sgw_ingest_accepted_total{deduplicated="false"}') + value('sgw_ingest_accepted_total{deduplicated="true"}'))
  t.ok(value('sgw_journal_last_seq') >= 2)
  t.ok(value('process_resident_memory_bytes') > 10_000_000, 'process memory is reported')
  t.notOk(text.includes(src.sourceId), 'no source ids')
})

t.test('control-plane uploads are bounded in all: past 4 MB being read at once the next gets 503; a renter is refused before its body', async (t) => {
  const src = await provision(gw)
  const head = (token: string) =>
    `POST /v1/byo/sources HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n`
  // 64 slow uploads of the largest size fill the 4 MB budget and hold it.
  const holders = await Promise.all(
    Array.from({ length: 64 }, () => new Promise<Socket>((resolve) => {
      const s = connect(gw.port, '127.0.0.1', () => s.write(`${head(src.creatorToken)}{"agent_id":`, () => resolve(s)))
      s.on('error', () => undefined)
    })),
  )
  await new Promise((r) => setTimeout(r, 300))
  const refused = await rawRequest(gw.port, [`${head(src.creatorToken)}{"agent_id":`])
  t.equal(refused?.status, 503, 'one more upload is refused')
  t.equal(refused?.body.error.code, 'overloaded')
  t.equal(refused?.headers['retry-after'], '1')
  for (const s of holders) s.destroy()
  await new Promise((r) => setTimeout(r, 300))
  const after = await call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: { agent_id: src.agentId, manifest: { archetype: 'x' } } })
  t.equal(after.body.error.code, 'invalid_manifest', 'clients that left gave their share back: the next body is read')

  const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'r-upload' } })).body.data.token
  const early = await rawRequest(gw.port, [head(renter)], { timeoutMs: 2000 })
  t.equal(early?.status, 403, 'a renter is answered without sending its body')
})
