import t, { type Test } from 'tap'
import { openApiDocument } from '../../schemas/index.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * Every endpoint that reads a query string, through a real gateway, held to the same
 * rules: a parameter it does not take is 400 naming it, one given twice is 400 naming it,
 * a malformed value (a malformed id above all) is 400 invalid_request naming it, and good
 * values answer 200. Each row lists every parameter its endpoint takes, and the OpenAPI
 * document must list the same ones.
 */

const gw = await startTestGateway(t)
const admin = gw.adminToken
const src = await provision(gw)
const renterSubject = `renter:lists_${Date.now().toString(36)}`
const renterToken = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: admin, body: { role: 'renter', subject: renterSubject } })).body.data.token as string
const rental = await call(gw.url, 'POST', '/v1/admin/rentals', { token: admin, body: { renter_id: renterSubject, source_id: src.sourceId } })
if (rental.status !== 201) throw new Error(`rental: ${rental.status} ${JSON.stringify(rental.body)}`)
const rentalId = rental.body.data.rental_id as string
const ticketFor = async () => (await call(gw.url, 'POST', `/v1/rentals/${rentalId}/stream-tickets`, { token: renterToken })).body.data.ticket as string

interface Row {
  /** As the OpenAPI document names it. */
  readonly pattern: string
  readonly path: string
  readonly token: string
  /**
   * Every parameter the endpoint takes, each with a good value; all of them together answer
   * 200. Undefined: taken, but left out of that request (a receipt cursor needs receipts).
   */
  readonly takes: Record<string, string | (() => Promise<string>) | undefined>
  /** Queries with one bad value each, and the parameter it must name. */
  readonly malformed: ReadonlyArray<readonly [string, string]>
  /** The good request, where GET would not do: HEAD of the event stream with its ticket instead of the token. */
  readonly good?: { readonly method: 'HEAD'; readonly token: undefined }
}

const receiptFilters = {
  from: '2020-01-01T00:00:00Z',
  to: '2030-01-01T00:00:00Z',
  outcome: 'pending',
  severity: 'warning',
  token: 'So11111111111111111111111111111111111111112',
  status: 'none',
}
const badFilters = [['from=yesterday', 'from'], ['outcome=win', 'outcome'], ['severity=a%20b', 'severity'], ['token=not-a-token!', 'token'], ['include_test=yes', 'include_test']] as const
const badPage = [['limit=0', 'limit'], ['limit=5x', 'limit'], ['cursor=a%20b', 'cursor'], ['cursor=', 'cursor']] as const

const ROWS: Row[] = [
  {
    pattern: '/v1/admin/tokens', path: '/v1/admin/tokens', token: admin,
    takes: { role: 'renter', subject: renterSubject, state: 'live', limit: '5', cursor: async () => (await call(gw.url, 'GET', '/v1/admin/tokens?limit=1', { token: admin })).body.next_cursor },
    malformed: [['subject=a%20b', 'subject'], ['subject=', 'subject'], ['subject=..', 'subject'], ['role=root', 'role'], ['state=dead', 'state'], ...badPage],
  },
  {
    pattern: '/v1/admin/agents', path: '/v1/admin/agents', token: admin,
    takes: { creator_id: src.creatorId, limit: '5', cursor: src.agentId },
    malformed: [['creator_id=a/b', 'creator_id'], [`creator_id=${'x'.repeat(129)}`, 'creator_id'], ...badPage],
  },
  {
    pattern: '/v1/byo/agents/{agent_id}/sources', path: `/v1/byo/agents/${src.agentId}/sources`, token: src.creatorToken,
    takes: { limit: '5', cursor: src.sourceId },
    malformed: badPage,
  },
  {
    pattern: '/v1/byo/sources', path: '/v1/byo/sources', token: src.creatorToken,
    takes: { creator_id: src.creatorId, agent_id: src.agentId, state: 'live', limit: '5', cursor: src.sourceId },
    malformed: [['agent_id=a%00b', 'agent_id'], ['creator_id=', 'creator_id'], ['state=gone', 'state'], ...badPage],
  },
  {
    pattern: '/v1/byo/sources/{source_id}/ingest-errors', path: `/v1/byo/sources/${src.sourceId}/ingest-errors`, token: src.creatorToken,
    takes: { limit: '5', cursor: undefined },
    malformed: badPage,
  },
  { pattern: '/v1/byo/sources/{source_id}/keys', path: `/v1/byo/sources/${src.sourceId}/keys`, token: src.creatorToken, takes: {}, malformed: [] },
  { pattern: '/v1/byo/sources/{source_id}/disputes', path: `/v1/byo/sources/${src.sourceId}/disputes`, token: src.creatorToken, takes: {}, malformed: [] },
  {
    pattern: '/v1/rentals', path: '/v1/rentals', token: admin,
    takes: { renter_id: renterSubject, source_id: src.sourceId, state: 'active', limit: '5', cursor: rentalId },
    malformed: [['source_id=%00junk', 'source_id'], ['source_id=', 'source_id'], ['source_id=src_short', 'source_id'], [`source_id=${rentalId}`, 'source_id'], ['renter_id=a%20b', 'renter_id'], ['state=over', 'state'], ['limit=201', 'limit'], ...badPage],
  },
  {
    pattern: '/v1/rentals/{rental_id}/signals', path: `/v1/rentals/${rentalId}/signals`, token: renterToken,
    takes: { after: '0', limit: '5' },
    malformed: [['after=x', 'after'], ['limit=1001', 'limit'], ['limit=', 'limit']],
  },
  {
    pattern: '/v1/rentals/{rental_id}/events', path: `/v1/rentals/${rentalId}/events`, token: renterToken,
    takes: { ticket: ticketFor, last_event_id: '0' },
    malformed: [['last_event_id=x', 'last_event_id']],
    good: { method: 'HEAD', token: undefined },
  },
  { pattern: '/v1/rentals/{rental_id}/webhook/deliveries', path: `/v1/rentals/${rentalId}/webhook/deliveries`, token: renterToken, takes: {}, malformed: [] },
  {
    pattern: '/v1/byo/sources/{source_id}/receipts', path: `/v1/byo/sources/${src.sourceId}/receipts`, token: src.creatorToken,
    takes: { ...receiptFilters, include_test: 'true', signal_id: 'sig-00000001', limit: '5', cursor: undefined },
    malformed: [...badFilters, ...badPage, ['limit=1001', 'limit'], ['signal_id=short', 'signal_id']],
  },
  {
    pattern: '/v1/byo/receipts', path: '/v1/byo/receipts', token: src.creatorToken,
    takes: { ...receiptFilters, include_test: 'true', signal_id: 'sig-00000001', source_id: src.sourceId, agent_id: src.agentId, limit: '5', cursor: undefined },
    malformed: [['source_id=x', 'source_id'], ['source_id=', 'source_id'], ['agent_id=a%20b', 'agent_id'], ...badFilters, ...badPage],
  },
  {
    pattern: '/v1/byo/sources/{source_id}/receipts/export', path: `/v1/byo/sources/${src.sourceId}/receipts/export`, token: src.creatorToken,
    takes: { ...receiptFilters, include_test: 'false', signal_id: 'sig-00000001', format: 'csv' },
    malformed: [...badFilters, ['format=xml', 'format']],
  },
  {
    pattern: '/v1/byo/receipts/export', path: '/v1/byo/receipts/export', token: src.creatorToken,
    takes: { ...receiptFilters, include_test: 'false', signal_id: 'sig-00000001', source_id: src.sourceId, agent_id: src.agentId, format: 'ndjson' },
    malformed: [['source_id=%2e%2e', 'source_id'], ['agent_id=', 'agent_id'], ...badFilters],
  },
  { pattern: '/v1/usage', path: '/v1/usage', token: src.creatorToken, takes: { month: '2030-01' }, malformed: [['month=2030-13', 'month']] },
  {
    pattern: '/v1/admin/usage', path: '/v1/admin/usage', token: admin,
    takes: { principal: `renter:${renterSubject}`, month: '2030-01' },
    malformed: [['principal=renter:a%20b', 'principal'], ['principal=root:x', 'principal'], ['principal=renter:acme&month=jan', 'month']],
  },
]

/** GET (or HEAD) with a token, the body parsed when it is JSON. */
async function get(path: string, token: string | undefined, method = 'GET'): Promise<{ status: number; body: any }> {
  const res = await fetch(`${gw.url}${path}`, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
  const text = await res.text()
  return { status: res.status, body: res.headers.get('content-type') === 'application/json' && text !== '' ? JSON.parse(text) : text }
}

async function goodQuery(row: Row): Promise<string> {
  const pairs: string[][] = []
  for (const [name, value] of Object.entries(row.takes)) if (value !== undefined) pairs.push([name, typeof value === 'string' ? value : await value()])
  return new URLSearchParams(pairs).toString()
}

const refused = (t: Test, res: { status: number; body: any }, message: RegExp, what: string) => {
  t.equal(res.status, 400, what)
  t.equal(res.body?.error?.code, 'invalid_request', what)
  t.match(res.body?.error?.message, message, what)
}

for (const row of ROWS) {
  t.test(row.pattern, async (t) => {
    const query = await goodQuery(row)
    const good = await get(query === '' ? row.path : `${row.path}?${query}`, row.good === undefined ? row.token : row.good.token, row.good?.method)
    t.equal(good.status, 200, `every parameter, good: ${query}${good.status === 200 ? '' : ` (${JSON.stringify(good.body)})`}`)

    refused(t, await get(`${row.path}?${query === '' ? '' : `${query}&`}nope=1`, row.token), /^unknown query parameter "nope"; this endpoint takes /, 'an unknown parameter')
    for (const [name, value] of Object.entries(row.takes)) {
      const once = typeof value === 'string' ? value : 'x'
      const twice = new URLSearchParams([[name, once], [name, once]]).toString()
      refused(t, await get(`${row.path}?${twice}`, row.token), new RegExp(`^query parameter ${name} is given more than once$`), `${name} given twice`)
    }
    for (const [bad, name] of row.malformed) refused(t, await get(`${row.path}?${bad}`, row.token), new RegExp(`^${name}\\b`), `${bad} names ${name}`)

    const documented = (openApiDocument(gw.url).paths as any)[row.pattern]?.get?.parameters?.filter((p: any) => p.in === 'query').map((p: any) => p.name) ?? []
    t.same([...documented].sort(), Object.keys(row.takes).sort(), 'the OpenAPI document lists the same parameters')
  })
}

t.test('a list that takes no parameter says so', async (t) => {
  refused(t, await get(`/v1/byo/sources/${src.sourceId}/keys?limit=5`, src.creatorToken), /^unknown query parameter "limit"; this endpoint takes none$/, 'keys')
})
