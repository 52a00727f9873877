import t from 'tap'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

// Low allowances so the limits show within a few requests; the store is empty, which
// changes nothing about who is let through how often.
const gw = await startTestGateway(t, { env: { READ_RATE_ANON_PER_MIN: '3', READ_RATE_TOKEN_PER_MIN: '5', READ_RATE_RENTAL_PER_MIN: '8', TRUSTED_PROXIES: '127.0.0.1' } })
const rented = await provision(gw)
const open = await provision(gw)
for (const s of [rented, open]) await call(gw.url, 'PATCH', `/v1/byo/sources/${s.sourceId}`, { token: s.creatorToken, body: { listing: { public_receipts: true } } })
const renter = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'renter', subject: 'rate-renter' } })).body.data.token as string
await call(gw.url, 'POST', '/v1/admin/rentals', { token: gw.adminToken, body: { renter_id: 'rate-renter', source_id: rented.sourceId } })

async function statuses(path: string, n: number, headers: Record<string, string>): Promise<number[]> {
  const out: number[] = []
  for (let i = 0; i < n; i++) {
    const res = await fetch(gw.url + path, { headers })
    await res.arrayBuffer()
    out.push(res.status)
  }
  return out
}
const list = (s: { sourceId: string }) => `/v1/byo/sources/${s.sourceId}/receipts`

t.test('anonymous reads: per client address (X-Forwarded-For from a trusted proxy), an IPv6 client by its /64', async (t) => {
  const from = (address: string) => ({ 'x-forwarded-for': address })
  t.same(await statuses(list(open), 4, from('203.0.113.5')), [200, 200, 200, 429])
  const refused = await fetch(gw.url + list(open), { headers: from('203.0.113.5') })
  t.equal(refused.status, 429)
  t.equal(refused.headers.get('retry-after'), '20', 'one read comes back every 20 s at 3 a minute')
  t.equal(((await refused.json()) as any).error.code, 'rate_limited')
  t.same(await statuses(list(open), 3, from('203.0.113.6')), [200, 200, 200], 'another address has its own')
  t.same(await statuses(list(open), 2, from('2001:db8:0:0::1')), [200, 200])
  t.same(await statuses(list(open), 2, from('2001:db8:0:0::ffff')), [200, 429], 'the same /64 shares one')
  t.same(await statuses('/v1/byo/receipts/rc_00000000000000000000000000000000', 4, from('203.0.113.7')), [404, 404, 404, 429], 'a 404 takes from the allowance too')
})

t.test('a token has its own allowance, higher than an address\'s; a renter reads its rented source on the rental\'s', async (t) => {
  t.same(await statuses(list(open), 6, { authorization: `Bearer ${rented.creatorToken}` }), [200, 200, 200, 200, 200, 429])
  t.same(await statuses(list(rented), 9, { authorization: `Bearer ${renter}` }), [200, 200, 200, 200, 200, 200, 200, 200, 429], 'the rental\'s 8')
  t.same(await statuses(list(open), 6, { authorization: `Bearer ${renter}` }), [200, 200, 200, 200, 200, 429], 'elsewhere, the token\'s 5')
  t.same(await statuses(list(open), 12, { authorization: `Bearer ${gw.adminToken}` }), Array(12).fill(200), 'the admin is not limited')
})
