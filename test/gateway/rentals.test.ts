import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import type { LaunchedGateway } from '../../harness/gateway-launcher.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

let counter = 0

/** A renter token for a new subject. */
async function renter(gw: LaunchedGateway, subject = `renter:${++counter}_${Date.now().toString(36)}`): Promise<{ token: string; subject: string }> {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject } })
  if (res.status !== 201) throw new Error(`renter token: ${res.status}`)
  return { token: res.body.data.token, subject }
}

const rent = (gw: LaunchedGateway, body: unknown, token = gw.adminToken) => call(gw.url, 'POST', '/v1/admin/rentals', { token, body })
const iso = (ms: number) => new Date(ms).toISOString()

t.test('rentals through the gateway', async (t) => {
  const gw = await startTestGateway(t)
  const src = await provision(gw)
  const alice = await renter(gw)
  const bob = await renter(gw)

  t.test('the admin creates a rental: 201, active, starting now, until ended', async (t) => {
    const before = Date.now()
    const res = await rent(gw, { renter_id: alice.subject, source_id: src.sourceId })
    t.equal(res.status, 201)
    const r = res.body.data
    t.match(r, { renter_id: alice.subject, source_id: src.sourceId, creator_id: src.creatorId, state: 'active', expires_at: null, ended_at: null, end_reason: null })
    t.match(r.rental_id, /^rnt_[A-Za-z0-9_-]{16}$/)
    t.ok(Date.parse(r.starts_at) >= before - 1 && Date.parse(r.starts_at) <= Date.now(), 'starts_at defaults to now')
    t.equal(r.created_at, r.starts_at)
    t.same(Object.keys(r).sort(), ['created_at', 'creator_id', 'end_reason', 'ended_at', 'expires_at', 'rental_id', 'renter_id', 'source_id', 'starts_at', 'state'])
  })

  t.test('a rental with a future starts_at is scheduled', async (t) => {
    const startsAt = iso(Date.now() + 3_600_000)
    const res = await rent(gw, { renter_id: alice.subject, source_id: src.sourceId, starts_at: startsAt, expires_at: iso(Date.now() + 7_200_000) })
    t.equal(res.status, 201)
    t.match(res.body.data, { state: 'scheduled', starts_at: startsAt })
  })

  t.test('bad input is refused with 400 invalid_request naming the field', async (t) => {
    const now = Date.now()
    const cases: Array<[unknown, RegExp]> = [
      [{ source_id: src.sourceId }, /renter_id is required/],
      [{ renter_id: alice.subject }, /source_id is required/],
      [{ renter_id: alice.subject, source_id: src.sourceId, owner: true }, /unknown field owner/],
      [{ renter_id: 'has space', source_id: src.sourceId }, /renter_id/],
      [{ renter_id: '..', source_id: src.sourceId }, /renter_id/],
      [{ renter_id: alice.subject, source_id: src.sourceId, starts_at: 1_900_000_000 }, /starts_at must be string/],
      [{ renter_id: alice.subject, source_id: src.sourceId, starts_at: '2030-01-01 00:00:00Z' }, /starts_at must be an ISO 8601 UTC time/],
      [{ renter_id: alice.subject, source_id: src.sourceId, expires_at: '2030-01-01T00:00:00+02:00' }, /expires_at must be an ISO 8601 UTC time/],
      [{ renter_id: alice.subject, source_id: src.sourceId, starts_at: iso(now + 60_000), expires_at: iso(now + 60_000) }, /expires_at must be after starts_at/],
      [{ renter_id: alice.subject, source_id: src.sourceId, starts_at: iso(now - 3_600_000), expires_at: iso(now - 1000) }, /expires_at must be in the future|starts_at must not be/],
      [{ renter_id: alice.subject, source_id: src.sourceId, starts_at: iso(now - 600_000) }, /starts_at must not be more than 5 minutes in the past/],
    ]
    for (const [body, problem] of cases) {
      const res = await rent(gw, body)
      t.equal(res.status, 400, JSON.stringify(body))
      t.equal(res.body.error.code, 'invalid_request')
      t.match(res.body.error.message, problem)
    }
    const past = await rent(gw, { renter_id: alice.subject, source_id: src.sourceId, expires_at: iso(now - 1000) })
    t.match(past.body.error.message, /expires_at must be in the future/)
    const notJson = await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, rawBody: Buffer.from('{"renter_id":'), headers: { 'content-type': 'application/json' } })
    t.equal(notJson.status, 400)
  })

  t.test('a source that does not exist is 404 not_found', async (t) => {
    const res = await rent(gw, { renter_id: alice.subject, source_id: 'src_doesnotexist' })
    t.equal(res.status, 404)
    t.equal(res.body.error.code, 'not_found')
  })

  t.test('access: who may create, read, list and end a rental', async (t) => {
    const made = (await rent(gw, { renter_id: alice.subject, source_id: src.sourceId })).body.data
    const path = `/v1/rentals/${made.rental_id}`
    const read = async (token: string | undefined) => call(gw.url, 'GET', path, token === undefined ? {} : { token })
    const table: Array<[string, string | undefined, number, string | undefined]> = [
      ['the admin', gw.adminToken, 200, undefined],
      ['its renter', alice.token, 200, undefined],
      ['another renter', bob.token, 404, 'not_found'],
      ['the creator of the source', src.creatorToken, 403, 'forbidden'],
      ['no token', undefined, 401, 'unauthorized'],
      ['a bad token', 'sgw_not_a_real_token_at_all_000000000000', 401, 'unauthorized'],
    ]
    for (const [who, token, status, code] of table) {
      const res = await read(token)
      t.equal(res.status, status, `GET one rental: ${who}`)
      if (code !== undefined) t.equal(res.body.error.code, code)
      else t.same(res.body.data, made)
    }
    const missing = await call(gw.url, 'GET', '/v1/rentals/rnt_doesnotexist', { token: bob.token })
    t.same([missing.status, missing.body.error.code], [404, 'not_found'], 'another renter\'s rental reads like a missing one')

    const list = async (token: string | undefined, query = '') => call(gw.url, 'GET', `/v1/rentals${query}`, token === undefined ? {} : { token })
    const ids = (res: Awaited<ReturnType<typeof list>>) => (res.body.data as Array<{ rental_id: string; renter_id: string }>).map((r) => r.rental_id)
    t.ok(ids(await list(gw.adminToken)).includes(made.rental_id), 'the admin lists every rental')
    const own = await list(alice.token)
    t.equal(own.status, 200)
    t.ok(ids(own).includes(made.rental_id))
    t.ok((own.body.data as Array<{ renter_id: string }>).every((r) => r.renter_id === alice.subject), 'a renter lists only its own')
    t.same(ids(await list(bob.token)), [], 'another renter lists none of them')
    t.same(ids(await list(bob.token, `?renter_id=${encodeURIComponent(alice.subject)}`)), [], 'naming another renter lists nothing either')
    t.same([(await list(src.creatorToken)).status, (await list(src.creatorToken)).body.error.code], [403, 'forbidden'])
    t.equal((await list(undefined)).status, 401)
    t.equal((await list('sgw_not_a_real_token_at_all_000000000000')).status, 401)

    for (const [who, token, status] of [['a renter', alice.token, 403], ['a creator', src.creatorToken, 403], ['no token', undefined, 401]] as const) {
      const created = await call(gw.url, 'POST', '/v1/admin/rentals', { ...(token !== undefined && { token }), body: { renter_id: alice.subject, source_id: src.sourceId } })
      t.equal(created.status, status, `POST /v1/admin/rentals: ${who}`)
      const ended = await call(gw.url, 'POST', `${'/v1/admin/rentals/'}${made.rental_id}/end`, token === undefined ? {} : { token })
      t.equal(ended.status, status, `POST end: ${who}`)
    }
    t.equal((await read(alice.token)).body.data.state, 'active', 'none of the refused calls ended it')
  })

  t.test('ending a rental: 200 ended; again 200 with the same record; unknown 404', async (t) => {
    const made = (await rent(gw, { renter_id: bob.subject, source_id: src.sourceId })).body.data
    const end = () => call(gw.url, 'POST', `/v1/admin/rentals/${made.rental_id}/end`, { token: gw.adminToken })
    const first = await end()
    t.equal(first.status, 200)
    t.match(first.body.data, { rental_id: made.rental_id, state: 'ended', end_reason: 'ended' })
    t.ok(Date.parse(first.body.data.ended_at) >= Date.parse(made.starts_at))
    await sleep(5)
    const again = await end()
    t.equal(again.status, 200)
    t.same(again.body.data, first.body.data)
    t.same((await call(gw.url, 'GET', `/v1/rentals/${made.rental_id}`, { token: bob.token })).body.data, first.body.data, 'its renter reads it ended')
    const withBody = await call(gw.url, 'POST', `/v1/admin/rentals/${made.rental_id}/end`, { token: gw.adminToken, body: { reason: 'x' } })
    t.same([withBody.status, withBody.body.error.code], [400, 'invalid_request'])
    const unknown = await call(gw.url, 'POST', '/v1/admin/rentals/rnt_doesnotexist/end', { token: gw.adminToken })
    t.same([unknown.status, unknown.body.error.code], [404, 'not_found'])
  })

  t.test('a rental expires by itself at its expires_at', async (t) => {
    const expiresAt = iso(Date.now() + 1500)
    const made = (await rent(gw, { renter_id: bob.subject, source_id: src.sourceId, expires_at: expiresAt })).body.data
    t.equal(made.state, 'active')
    await sleep(Date.parse(expiresAt) - Date.now() + 50)
    const res = await call(gw.url, 'GET', `/v1/rentals/${made.rental_id}`, { token: bob.token })
    t.match(res.body.data, { state: 'expired', ended_at: expiresAt, end_reason: 'expired' })
    const ended = await call(gw.url, 'POST', `/v1/admin/rentals/${made.rental_id}/end`, { token: gw.adminToken })
    t.same([ended.status, ended.body.data.state], [200, 'expired'], 'ending an expired rental leaves it expired')
  })

  t.test('the list: oldest first, paged with cursor and limit, filtered by renter_id, source_id and state', async (t) => {
    const carol = await renter(gw)
    const other = await provision(gw)
    const made: string[] = []
    for (let i = 0; i < 5; i++) made.push((await rent(gw, { renter_id: carol.subject, source_id: i % 2 === 0 ? src.sourceId : other.sourceId })).body.data.rental_id)
    await call(gw.url, 'POST', `/v1/admin/rentals/${made[1]}/end`, { token: gw.adminToken })
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const q: string = `?limit=2${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`
      const page = await call(gw.url, 'GET', `/v1/rentals${q}`, { token: carol.token })
      t.equal(page.status, 200)
      t.ok(page.body.data.length <= 2)
      seen.push(...page.body.data.map((r: { rental_id: string }) => r.rental_id))
      cursor = page.body.next_cursor
      pages++
    } while (cursor !== null && pages < 10)
    t.same(seen, made, 'every rental once, in creation order, over three pages')
    t.equal(pages, 3)
    const bySource = await call(gw.url, 'GET', `/v1/rentals?source_id=${other.sourceId}&renter_id=${encodeURIComponent(carol.subject)}`, { token: gw.adminToken })
    t.same(bySource.body.data.map((r: { rental_id: string }) => r.rental_id), [made[1], made[3]])
    const active = await call(gw.url, 'GET', `/v1/rentals?state=active`, { token: carol.token })
    t.same(active.body.data.map((r: { rental_id: string }) => r.rental_id), [made[0], made[2], made[3], made[4]])
    const ended = await call(gw.url, 'GET', `/v1/rentals?state=ended&renter_id=${encodeURIComponent(carol.subject)}`, { token: gw.adminToken })
    t.same(ended.body.data.map((r: { rental_id: string }) => r.rental_id), [made[1]])
    for (const q of ['?state=paused', '?limit=0', '?limit=201', '?limit=1e2', '?renter_id=a%20b', '?cursor=rnt_nope']) {
      const res = await call(gw.url, 'GET', `/v1/rentals${q}`, { token: gw.adminToken })
      t.same([res.status, res.body.error?.code], [400, 'invalid_request'], q)
    }
  })

  t.test('open rentals per renter are bounded: the 101st is 409 limit_exceeded until one ends', async (t) => {
    const dave = await renter(gw)
    const sources = [src.sourceId, (await provision(gw)).sourceId]
    let last = ''
    for (let i = 0; i < 100; i++) {
      const res = await rent(gw, { renter_id: dave.subject, source_id: sources[i % 2] })
      if (res.status !== 201) t.fail(`rental ${i}: ${res.status} ${JSON.stringify(res.body)}`)
      last = res.body.data.rental_id
    }
    const over = await rent(gw, { renter_id: dave.subject, source_id: src.sourceId })
    t.same([over.status, over.body.error.code], [409, 'limit_exceeded'])
    t.match(over.body.error.message, /100 open rentals/)
    await call(gw.url, 'POST', `/v1/admin/rentals/${last}/end`, { token: gw.adminToken })
    t.equal((await rent(gw, { renter_id: dave.subject, source_id: src.sourceId })).status, 201)
  })

  t.test('HEAD and other methods behave like the other routes', async (t) => {
    const head = await fetch(`${gw.url}/v1/rentals`, { method: 'HEAD', headers: { authorization: `Bearer ${gw.adminToken}` } })
    t.equal(head.status, 200)
    const del = await call(gw.url, 'DELETE', '/v1/rentals', { token: gw.adminToken })
    t.equal(del.status, 405)
  })
})

t.test('RENTALS_MAX bounds the rentals kept in all', async (t) => {
  const gw = await startTestGateway(t, { env: { RENTALS_MAX: '2' } })
  const src = await provision(gw)
  t.equal((await rent(gw, { renter_id: 'r1', source_id: src.sourceId })).status, 201)
  t.equal((await rent(gw, { renter_id: 'r2', source_id: src.sourceId })).status, 201)
  const over = await rent(gw, { renter_id: 'r3', source_id: src.sourceId })
  t.same([over.status, over.body.error.code], [409, 'limit_exceeded'])
})

t.test('rentals survive a clean restart and kill -9, states and all', async (t) => {
  const first = await startTestGateway(t)
  const src = await provision(first)
  const erin = await renter(first)
  const kept = (await rent(first, { renter_id: erin.subject, source_id: src.sourceId })).body.data
  const ended = (await call(first.url, 'POST', `/v1/admin/rentals/${(await rent(first, { renter_id: erin.subject, source_id: src.sourceId })).body.data.rental_id}/end`, { token: first.adminToken })).body.data
  const expiring = (await rent(first, { renter_id: erin.subject, source_id: src.sourceId, expires_at: iso(Date.now() + 4000) })).body.data
  // The last one answered just before the kill: its 201 came after the write was durable.
  const last = (await rent(first, { renter_id: erin.subject, source_id: src.sourceId })).body.data
  await first.kill()
  t.equal((await first.exited()).signal, 'SIGKILL')

  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  const read = async (gw: LaunchedGateway, id: string) => (await call(gw.url, 'GET', `/v1/rentals/${id}`, { token: first.adminToken })).body.data
  t.same(await read(second, kept.rental_id), kept)
  t.same(await read(second, ended.rental_id), ended)
  t.same(await read(second, last.rental_id), last)
  t.same((await call(second.url, 'GET', `/v1/rentals/${kept.rental_id}`, { token: erin.token })).body.data, kept, 'its renter token still reads it')
  await second.stop()

  // Down while the rental expired: the next start shows it expired.
  await sleep(Math.max(0, Date.parse(expiring.expires_at) - Date.now() + 50))
  const third = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  t.match(await read(third, expiring.rental_id), { state: 'expired', ended_at: expiring.expires_at, end_reason: 'expired' })
  const list = await call(third.url, 'GET', `/v1/rentals?renter_id=${encodeURIComponent(erin.subject)}`, { token: first.adminToken })
  t.same(list.body.data.map((r: { rental_id: string }) => r.rental_id), [kept.rental_id, ended.rental_id, expiring.rental_id, last.rental_id])
})
