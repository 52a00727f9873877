import t from 'tap'
import { generateCreatorKey, signPush } from '../../harness/signed-push.js'
import { call, EVM_TOKEN, MANIFEST, payload, provision, push, type ApiResponse, type Provisioned } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

const gw = await startTestGateway(t)
const admin = gw.adminToken

const renterToken = async (subject: string) => (await call(gw.url, 'POST', '/v1/admin/tokens', { token: admin, body: { role: 'renter', subject } })).body.data.token as string
const keysOf = async (src: Provisioned) => (await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys`, { token: src.creatorToken })).body.data as any[]
const newSource = async (src: Provisioned, manifest: unknown = MANIFEST) => {
  const res = await call(gw.url, 'POST', '/v1/byo/sources', { token: src.creatorToken, body: { agent_id: src.agentId, manifest } })
  if (res.status !== 201) throw new Error(`source not created: ${JSON.stringify(res.body)}`)
  return res.body.data.source_id as string
}

t.test('who may call each new route: admin, the owning creator, another creator, a renter, no token, a bad token', async (t) => {
  const renter = await renterToken('lifecycle-renter')
  const callers = { admin, owner: '', other: '', renter, none: undefined, bad: `${admin}x` } as Record<string, string | undefined>
  // Each row gets a fresh owner, so a call that changes something (a retirement) leaves the next row a live source.
  const rows: Array<{ route: string; expect: Record<string, number>; send: (src: Provisioned, token: string | undefined) => Promise<ApiResponse> }> = [
    {
      route: 'GET /v1/byo/sources',
      expect: { admin: 200, owner: 200, other: 200, renter: 403, none: 401, bad: 401 },
      send: (_src, token) => call(gw.url, 'GET', '/v1/byo/sources', { token }),
    },
    {
      route: 'GET /v1/admin/agents',
      expect: { admin: 200, owner: 403, other: 403, renter: 403, none: 401, bad: 401 },
      send: (_src, token) => call(gw.url, 'GET', '/v1/admin/agents', { token }),
    },
    {
      route: 'PATCH /v1/admin/agents/:agent_id',
      expect: { admin: 200, owner: 403, other: 403, renter: 403, none: 401, bad: 401 },
      send: (src, token) => call(gw.url, 'PATCH', `/v1/admin/agents/${src.agentId}`, { token, body: { slots: 3 } }),
    },
    {
      route: 'PATCH /v1/byo/sources/:source_id',
      expect: { admin: 200, owner: 200, other: 404, renter: 403, none: 401, bad: 401 },
      send: (src, token) => call(gw.url, 'PATCH', `/v1/byo/sources/${src.sourceId}`, { token, body: { listing: { public_receipts: true } } }),
    },
    {
      route: 'POST /v1/byo/sources/:source_id/retire',
      expect: { admin: 200, owner: 200, other: 404, renter: 403, none: 401, bad: 401 },
      send: (src, token) => call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/retire`, { token }),
    },
    {
      route: 'POST /v1/byo/sources/:source_id/keys/:key_id/revoke {"reason"}',
      expect: { admin: 200, owner: 200, other: 404, renter: 403, none: 401, bad: 401 },
      send: (src, token) => call(gw.url, 'POST', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}/revoke`, { token, body: { reason: 'rotation' } }),
    },
    {
      route: 'GET /v1/byo/sources/:source_id/keys/:key_id',
      expect: { admin: 200, owner: 200, other: 404, renter: 403, none: 401, bad: 401 },
      send: (src, token) => call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/keys/${src.keyId}`, { token }),
    },
  ]
  for (const row of rows) {
    for (const [who, status] of Object.entries(row.expect)) {
      const owner = await provision(gw)
      const other = await provision(gw)
      const token = who === 'owner' ? owner.creatorToken : who === 'other' ? other.creatorToken : callers[who]
      const res = await row.send(owner, token)
      t.equal(res.status, status, `${row.route} as ${who}: ${status}`)
      if (status === 404) {
        // Another creator's source answers exactly like one that does not exist.
        const missing = await row.send({ ...owner, sourceId: 'src_AAAAAAAAAAAAAAAA' }, token)
        t.same([res.body.error.code, res.body.error.message], [missing.body.error.code, missing.body.error.message], `${row.route} as ${who}: the 404 of a missing source`)
      }
      if (status === 200 && row.route === 'GET /v1/byo/sources' && who !== 'admin') {
        t.same(res.body.data.map((s: any) => s.creator_id), [(who === 'owner' ? owner : other).creatorId], `${row.route} as ${who}: only its own source`)
      }
    }
  }
})

t.test("a creator lists its own sources over all its agents, oldest first, paged and filtered; the admin lists anyone's", async (t) => {
  const a = await provision(gw, { slots: 3 })
  const second = await newSource(a)
  const agentId = `lifecycle-agent-${Date.now()}`
  t.equal((await call(gw.url, 'POST', '/v1/admin/agents', { token: admin, body: { agent_id: agentId, creator_id: a.creatorId, slots: 1 } })).status, 201)
  const onOther = (await call(gw.url, 'POST', '/v1/byo/sources', { token: a.creatorToken, body: { agent_id: agentId, manifest: MANIFEST } })).body.data.source_id
  const b = await provision(gw)
  const all = [a.sourceId, second, onOther]

  const list = (query: string, token = a.creatorToken) => call(gw.url, 'GET', `/v1/byo/sources${query}`, { token })
  const ids = (res: ApiResponse) => res.body.data.map((s: any) => s.source_id)
  t.same(ids(await list('')), all, 'every source of the creator, on both agents, oldest first')
  const first = await list('?limit=2')
  t.same(ids(first), all.slice(0, 2))
  t.equal(first.body.next_cursor, second)
  const rest = await list(`?limit=2&cursor=${first.body.next_cursor}`)
  t.same(ids(rest), [onOther])
  t.equal(rest.body.next_cursor, null)
  t.match(first.body.data[0], { source_id: a.sourceId, agent_id: a.agentId, state: 'live', retired_at: null, updated_at: null, ingest_endpoint: new RegExp(`/v1/byo/sources/${a.sourceId}/signals$`) })
  t.same(ids(await list(`?agent_id=${agentId}`)), [onOther], 'by agent')
  t.same(ids(await list(`?creator_id=${b.creatorId}`)), [], "another creator's id finds nothing for a creator")
  t.same(ids(await list(`?agent_id=${b.agentId}`)), [], "nor does another creator's agent")
  t.same(ids(await list(`?creator_id=${a.creatorId}`, admin)), all, 'the admin filters by creator')
  t.same(ids(await list(`?creator_id=${a.creatorId}&agent_id=${a.agentId}`, admin)), [a.sourceId, second])
  t.same(ids(await list(`?creator_id=${b.creatorId}`, admin)), [b.sourceId])
  const everything = await list('?limit=200', admin)
  t.ok(ids(everything).includes(a.sourceId) && ids(everything).includes(b.sourceId), 'the admin sees every creator')

  await call(gw.url, 'POST', `/v1/byo/sources/${second}/retire`, { token: a.creatorToken })
  t.same(ids(await list('?state=live')), [a.sourceId, onOther])
  t.same(ids(await list('?state=retired')), [second])

  for (const [query, problem] of [
    ['?state=dead', /state must be live or retired/],
    ['?limit=0', /limit/],
    ['?limit=201', /limit/],
    ['?cursor=src_forged', /cursor/],
    ['?creator=x', /unknown query parameter "creator"/],
    ['?state=live&state=retired', /state is given more than once/],
    ['?creator_id=a%20b', /creator_id must be/],
    [`?agent_id=${'x'.repeat(129)}`, /agent_id must be/],
  ] as const) {
    const res = await list(query)
    t.equal(res.status, 400, query)
    t.equal(res.body.error.code, 'invalid_request', query)
    t.match(res.body.error.message, problem, query)
  }
})

t.test('the admin lists agents with their slots in use, paged and filtered by creator', async (t) => {
  const a = await provision(gw, { slots: 4 })
  const agentId = `agents-list-${Date.now()}`
  await call(gw.url, 'POST', '/v1/admin/agents', { token: admin, body: { agent_id: agentId, creator_id: a.creatorId, slots: 2 } })
  const list = (query: string) => call(gw.url, 'GET', `/v1/admin/agents${query}`, { token: admin })
  const mine = await list(`?creator_id=${a.creatorId}`)
  t.equal(mine.status, 200)
  t.same(mine.body.data, [
    { agent_id: a.agentId, creator_id: a.creatorId, slots: 4, created_at: mine.body.data[0].created_at, slots_used: 1, open_slots: 3 },
    { agent_id: agentId, creator_id: a.creatorId, slots: 2, created_at: mine.body.data[1].created_at, slots_used: 0, open_slots: 2 },
  ])
  const first = await list(`?creator_id=${a.creatorId}&limit=1`)
  t.equal(first.body.next_cursor, a.agentId)
  const second = await list(`?creator_id=${a.creatorId}&limit=1&cursor=${first.body.next_cursor}`)
  t.same(second.body.data.map((x: any) => x.agent_id), [agentId])
  t.equal(second.body.next_cursor, null)
  for (const query of ['?limit=1001', '?cursor=nobody', '?creator=x', '?creator_id=', '?creator_id=a/b']) {
    const res = await list(query)
    t.equal(res.status, 400, query)
    t.equal(res.body.error.code, 'invalid_request', query)
  }
})

t.test("an agent's slots change: never below those in use (409 slots_in_use), within 1 to 1000, and a new slot is open at once", async (t) => {
  const a = await provision(gw, { slots: 2 })
  await newSource(a)
  const patch = (body: unknown, agentId = a.agentId) => call(gw.url, 'PATCH', `/v1/admin/agents/${agentId}`, { token: admin, body })
  const below = await patch({ slots: 1 })
  t.equal(below.status, 409)
  t.equal(below.body.error.code, 'slots_in_use')
  t.match(below.body.error.message, /2 sources/)
  t.match((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: a.creatorToken })).body.data, { slots: 2, slots_used: 2, open_slots: 0 }, 'unchanged')
  const more = await patch({ slots: 3 })
  t.equal(more.status, 200)
  t.match(more.body.data, { agent_id: a.agentId, slots: 3, slots_used: 2, open_slots: 1 })
  t.equal((await call(gw.url, 'POST', '/v1/byo/sources', { token: a.creatorToken, body: { agent_id: a.agentId, manifest: MANIFEST } })).status, 201, 'the new slot takes a source')
  for (const [body, problem] of [
    [{ slots: 0 }, /slots/],
    [{ slots: 1001 }, /slots/],
    [{ slots: 2.5 }, /slots/],
    [{ slots: '3' }, /slots/],
    [{}, /slots is required/],
    [{ slots: 3, creator_id: 'x' }, /unknown field creator_id/],
    [null, /body/],
  ] as const) {
    const res = await patch(body)
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.body.error.code, 'invalid_request', JSON.stringify(body))
    t.match(res.body.error.message, problem, JSON.stringify(body))
  }
  const missing = await patch({ slots: 3 }, 'no-such-agent')
  t.equal(missing.status, 404)
  t.equal(missing.body.error.code, 'not_found')
})

t.test('a source update is checked as at registration, replaces what it names, and records updated_at', async (t) => {
  const a = await provision(gw)
  const patch = (body: unknown) => call(gw.url, 'PATCH', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken, body })
  const manifestCases: Array<[unknown, RegExp]> = [
    [null, /manifest/],
    [{ ...MANIFEST, severity_levels: [] }, /severity_levels/],
    [{ ...MANIFEST, max_rate: { rate: 10, per: 'day' } }, /max_rate\.per/],
    [{ ...MANIFEST, coverage: { chains: ['dogechain'] } }, /coverage\.chains/],
    [{ ...MANIFEST, secret_sauce: 'x' }, /secret_sauce/],
    [{ ...MANIFEST, max_rate: { rate: 1001, per: 'second' } }, /above this gateway's ceiling of 1000 per second/],
    [{ ...MANIFEST, max_rate: { rate: 100, per: 'second', burst: 10_001 } }, /max_rate\.burst: 10001 is above/],
    [{ ...MANIFEST, archetype: 'something-else' }, /manifest\.archetype cannot change/],
  ]
  for (const [manifest, problem] of manifestCases) {
    const res = await patch({ manifest })
    t.equal(res.status, 400, JSON.stringify(manifest))
    t.equal(res.body.error.code, 'invalid_manifest', JSON.stringify(manifest))
    t.match(res.body.error.message, problem, JSON.stringify(manifest))
  }
  for (const [body, problem] of [
    [{}, /give manifest, listing or both/],
    [{ listing: null }, /listing/],
    [{ listing: { public_receipts: 'yes' } }, /public_receipts/],
    [{ listing: {}, agent_id: a.agentId }, /unknown field agent_id/],
    [[], /body/],
  ] as const) {
    const res = await patch(body)
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.body.error.code, 'invalid_request', JSON.stringify(body))
    t.match(res.body.error.message, problem, JSON.stringify(body))
  }
  const untouched = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken })
  t.match(untouched.body.data, { manifest: MANIFEST, updated_at: null }, 'nothing refused changed anything')

  const newManifest = { ...MANIFEST, severity_levels: ['low', 'high'], contact: 'new@example.com' }
  const updated = await patch({ manifest: newManifest, listing: { public_receipts: true } })
  t.equal(updated.status, 200)
  t.same(updated.body.data.manifest, newManifest)
  t.same(updated.body.data.listing, { public_receipts: true, public_delay_seconds: 86_400 })
  t.type(updated.body.data.updated_at, 'string')
  const listingOnly = await patch({ listing: {} })
  t.same(listingOnly.body.data.listing, { public_receipts: false, public_delay_seconds: 86_400 }, 'a listing given takes its default, as at registration')
  t.same(listingOnly.body.data.manifest, newManifest, 'a manifest not given is kept')
  t.same((await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken })).body.data.manifest, newManifest, 'and read back')
})

t.test('new severity levels and chains apply to the next push', async (t) => {
  const a = await provision(gw)
  t.equal((await push(gw, a.sign(payload(a.sourceId, { severity: 'warning' })))).status, 202)
  const res = await call(gw.url, 'PATCH', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken, body: { manifest: { ...MANIFEST, severity_levels: ['low'], coverage: { chains: ['ethereum'] } } } })
  t.equal(res.status, 200)
  const oldSeverity = await push(gw, a.sign(payload(a.sourceId, { severity: 'warning', token: EVM_TOKEN })))
  t.equal(oldSeverity.status, 400)
  t.equal(oldSeverity.body.error.code, 'invalid_severity')
  const oldChain = await push(gw, a.sign(payload(a.sourceId, { severity: 'low' })))
  t.equal(oldChain.status, 400)
  t.equal(oldChain.body.error.code, 'invalid_token', 'a Solana token, no longer covered')
  t.equal((await push(gw, a.sign(payload(a.sourceId, { severity: 'low', token: EVM_TOKEN })))).status, 202)
})

t.test('a lower max_rate takes effect at once: the bucket is cut to the new burst and the next push over it gets 429', async (t) => {
  const a = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 1000, per: 'second', burst: 1000 } } })
  for (let i = 0; i < 10; i++) t.equal((await push(gw, a.sign(payload(a.sourceId)))).status, 202, `push ${i + 1} at the old rate`)
  const lower = await call(gw.url, 'PATCH', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken, body: { manifest: { ...MANIFEST, max_rate: { rate: 2, per: 'minute', burst: 2 } } } })
  t.equal(lower.status, 200)
  t.equal((await push(gw, a.sign(payload(a.sourceId)))).status, 202, 'the new burst: 1 of 2')
  t.equal((await push(gw, a.sign(payload(a.sourceId)))).status, 202, 'the new burst: 2 of 2')
  const limited = await push(gw, a.sign(payload(a.sourceId)))
  t.equal(limited.status, 429, 'the old bucket of about 990 was not kept')
  t.equal(limited.body.error.code, 'rate_limited')
  t.match(limited.body.error.message, /max_rate of 2 per minute/)
  t.ok(Number(limited.headers.get('retry-after')) >= 1, `Retry-After: ${limited.headers.get('retry-after')}`)
})

t.test('a retired source: its slot is free, its ingest answers exactly as an unknown source, its history stays readable, and repeating it is harmless', async (t) => {
  const a = await provision(gw, { slots: 1 })
  // A refusal before the retirement, to find again after it.
  t.equal((await push(gw, a.sign(payload(a.sourceId, { severity: 'bad' })))).status, 400)
  t.equal((await push(gw, a.sign(payload(a.sourceId)))).status, 202)
  const retired = await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/retire`, { token: a.creatorToken })
  t.equal(retired.status, 200)
  t.match(retired.body.data, { source_id: a.sourceId, state: 'retired', retired_at: String })

  const toRetired = await push(gw, a.sign(payload(a.sourceId)))
  const unknownId = 'src_AAAAAAAAAAAAAAAA'
  const toUnknown = await push(gw, signPush({ sourceId: unknownId, keyId: a.keyId, key: a.key, payload: payload(unknownId) }))
  t.equal(toRetired.status, 401)
  t.same({ ...toRetired.body, error: { ...toRetired.body.error, request_id: '' } }, { ...toUnknown.body, error: { ...toUnknown.body.error, request_id: '' } }, 'the same code and message as an unknown source')
  t.equal(toRetired.headers.get('www-authenticate'), toUnknown.headers.get('www-authenticate'))
  t.equal(toRetired.body.error.code, 'unknown_key')

  const errors = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/ingest-errors`, { token: a.creatorToken })
  t.equal(errors.status, 200, 'its ingest errors stay readable')
  t.same(errors.body.data.map((e: any) => e.code), ['invalid_severity'], 'and, as for an unknown source, ingest refused after the retirement is not added')
  const view = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken })
  t.match(view.body.data, { state: 'retired', retired_at: retired.body.data.retired_at, manifest: MANIFEST })
  t.equal((await keysOf(a)).length, 1, 'its keys stay listed')
  t.match((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: a.creatorToken })).body.data, { slots: 1, slots_used: 0, open_slots: 1 }, 'its slot is free')
  t.equal((await call(gw.url, 'GET', `/v1/byo/agents/${a.agentId}/sources`, { token: a.creatorToken })).body.data[0].state, 'retired', "the agent's list shows it retired")

  const again = await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/retire`, { token: gw.adminToken })
  t.equal(again.status, 200, 'retiring again is harmless')
  t.equal(again.body.data.retired_at, retired.body.data.retired_at, 'and keeps the first time')
  t.equal((await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/retire`, { token: a.creatorToken, body: { now: true } })).status, 400, 'retire takes no body')

  for (const [what, res] of [
    ['a new key', await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys`, { token: a.creatorToken, body: { public_key: a.key.publicKeyBase64 } })],
    ['a promotion', await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys/${a.keyId}/promote`, { token: a.creatorToken })],
    ['a new listing', await call(gw.url, 'PATCH', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken, body: { listing: { public_receipts: true } } })],
  ] as const) {
    t.equal(res.status, 409, what)
    t.equal(res.body.error.code, 'source_retired', what)
  }
  const revoked = await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys/${a.keyId}/revoke`, { token: a.creatorToken, body: { reason: 'compromise' } })
  t.equal(revoked.status, 200, "a retired source's key can still be revoked, ahead of a dispute")

  const next = await call(gw.url, 'POST', '/v1/byo/sources', { token: a.creatorToken, body: { agent_id: a.agentId, manifest: MANIFEST } })
  t.equal(next.status, 201, 'the freed slot takes a new source')
})

t.test('a key revocation may give a reason, kept on the key record and shown in the key list and key view', async (t) => {
  const a = await provision(gw)
  const revoke = (keyId: string, body?: unknown) => call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys/${keyId}/revoke`, { token: a.creatorToken, ...(body === undefined ? {} : { body }) })
  for (const body of [{ reason: 'leaked' }, { reason: null }, { reason: 'rotation', note: 'x' }, { reason: ['rotation'] }]) {
    const res = await revoke(a.keyId, body)
    t.equal(res.status, 400, JSON.stringify(body))
    t.equal(res.body.error.code, 'invalid_request', JSON.stringify(body))
  }
  t.equal((await keysOf(a))[0].state, 'active', 'a refused revocation revokes nothing')
  const first = await revoke(a.keyId, { reason: 'rotation' })
  t.equal(first.status, 200)
  t.match(first.body.data, { key_id: a.keyId, state: 'revoked', revocation_reason: 'rotation' })
  const later = await revoke(a.keyId, { reason: 'compromise' })
  t.match(later.body.data, { revocation_reason: 'compromise', revoked_at: first.body.data.revoked_at }, 'a leak found after the rotation: the reason escalates, the time stands')
  const back = await revoke(a.keyId, { reason: 'rotation' })
  t.equal(back.status, 409)
  t.equal(back.body.error.code, 'invalid_key_state')
  t.equal((await revoke(a.keyId)).body.data.revocation_reason, 'compromise', 'a repeat without a reason changes nothing')

  const plain = (await call(gw.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys`, { token: a.creatorToken, body: { public_key: generateCreatorKey().publicKeyBase64 } })).body.data
  t.equal(plain.revocation_reason, null)
  t.equal((await revoke(plain.key_id)).body.data.revocation_reason, null, 'no body still revokes, with no reason')
  const listed = await keysOf(a)
  t.same(listed.map((k) => [k.key_id, k.revocation_reason]), [[a.keyId, 'compromise'], [plain.key_id, null]], 'the key list shows each reason')
  const one = await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/keys/${a.keyId}`, { token: a.creatorToken })
  t.equal(one.status, 200)
  t.same(one.body.data, listed[0], 'the key view is the record the list shows')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${a.sourceId}/keys/key_nothing`, { token: a.creatorToken })).status, 404)
})

t.test('a retirement, a new manifest, new slots and a revocation reason survive a restart', async (t) => {
  const first = await startTestGateway(t)
  const a = await provision(first, { slots: 2 })
  const kept = await call(first.url, 'POST', '/v1/byo/sources', { token: a.creatorToken, body: { agent_id: a.agentId, manifest: MANIFEST } })
  t.equal(kept.status, 201)
  const newManifest = { ...MANIFEST, max_rate: { rate: 10, per: 'second', burst: 10 } }
  t.equal((await call(first.url, 'PATCH', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken, body: { manifest: newManifest } })).status, 200)
  t.equal((await call(first.url, 'POST', `/v1/byo/sources/${a.sourceId}/keys/${a.keyId}/revoke`, { token: a.creatorToken, body: { reason: 'compromise' } })).status, 200)
  t.equal((await call(first.url, 'POST', `/v1/byo/sources/${a.sourceId}/retire`, { token: a.creatorToken })).status, 200)
  t.equal((await call(first.url, 'PATCH', `/v1/admin/agents/${a.agentId}`, { token: first.adminToken, body: { slots: 5 } })).status, 200)
  await first.kill()
  const again = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  t.match((await call(again.url, 'GET', `/v1/byo/sources/${a.sourceId}`, { token: a.creatorToken })).body.data, { state: 'retired', retired_at: String, manifest: newManifest, updated_at: String })
  t.match((await call(again.url, 'GET', `/v1/byo/agents/${a.agentId}`, { token: a.creatorToken })).body.data, { slots: 5, slots_used: 1, open_slots: 4 })
  t.equal((await call(again.url, 'GET', `/v1/byo/sources/${a.sourceId}/keys/${a.keyId}`, { token: a.creatorToken })).body.data.revocation_reason, 'compromise')
  const unknownId = 'src_AAAAAAAAAAAAAAAA'
  // The key is revoked too; a live source would answer revoked_key.
  const toRetired = await push(again, a.sign(payload(a.sourceId)))
  const toUnknown = await push(again, signPush({ sourceId: unknownId, keyId: a.keyId, key: a.key, payload: payload(unknownId) }))
  t.same([toRetired.status, toRetired.body.error.code, toRetired.body.error.message], [toUnknown.status, toUnknown.body.error.code, toUnknown.body.error.message], 'ingest to it is still refused as to an unknown source')
  t.same((await call(again.url, 'GET', `/v1/byo/sources?state=live`, { token: a.creatorToken })).body.data.map((s: any) => s.source_id), [kept.body.data.source_id])
})
