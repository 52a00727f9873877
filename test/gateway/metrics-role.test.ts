import t from 'tap'
import { acceptLatencyBuckets } from '../../bench/ingest/gateway-metrics.js'
import { METRICS_PAGES_PER_SECOND } from '../../gateway/metrics-route.js'
import { call, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { namingBreaches, parsePrometheusText, sampleValue } from '../helpers/prometheus-text.js'

const gw = await startTestGateway(t)

const scrape = (token?: string, method = 'GET') => fetch(`${gw.url}/metrics`, { method, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })

async function issue(role: string, subject: string): Promise<{ token: string; token_id: string }> {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role, subject } })
  if (res.status !== 201) throw new Error(`issuing a ${role} token: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}

t.test('an admin issues a metrics token, which reads /metrics; the admin token still does', async (t) => {
  const res = await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'metrics', subject: 'prometheus' } })
  t.equal(res.status, 201)
  t.equal(res.body.data.role, 'metrics')
  t.equal(res.body.data.subject, 'prometheus')
  for (const token of [res.body.data.token as string, gw.adminToken]) {
    const page = await scrape(token)
    t.equal(page.status, 200)
    t.equal(page.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8')
    t.match(await page.text(), /^sgw_ingest_accepted_total\{deduplicated="false"\} \d+$/m)
    const head = await scrape(token, 'HEAD')
    t.equal(head.status, 200, 'HEAD too')
    t.equal(await head.text(), '')
  }
})

t.test('the token list filters on role=metrics', async (t) => {
  const subject = `scraper-${Date.now()}`
  const made = await issue('metrics', subject)
  await issue('renter', subject)
  const listed = await call(gw.url, 'GET', `/v1/admin/tokens?role=metrics&subject=${subject}`, { token: gw.adminToken })
  t.equal(listed.status, 200)
  t.same(listed.body.data.map((r: any) => [r.token_id, r.role]), [[made.token_id, 'metrics']])
  const bad = await call(gw.url, 'GET', '/v1/admin/tokens?role=scraper', { token: gw.adminToken })
  t.equal(bad.status, 400)
  t.match(bad.body.error.message, /creator, renter, metrics or scorer/)
})

t.test('a metrics token calls nothing but /metrics: every bearer route in the OpenAPI document answers it 403, as it answers a renter on the routes renters may not call', async (t) => {
  const { token } = await issue('metrics', 'probe')
  const renter = (await issue('renter', 'probe')).token
  const src = await provision(gw)
  const doc = (await call(gw.url, 'GET', '/v1/openapi.json')).body
  let probed = 0
  for (const [path, ops] of Object.entries<Record<string, { security?: unknown }>>(doc.paths)) {
    if (path === '/metrics') continue
    for (const [method, op] of Object.entries(ops)) {
      if (op.security === undefined) continue
      // Real ids of a real source: a refusal must come from the role, not from a missing thing.
      const url = gw.url + path.replace('{source_id}', src.sourceId).replace('{agent_id}', src.agentId).replace('{key_id}', src.keyId).replace(/\{[a-z_]+\}/g, 'x')
      const init = (bearer: string) => ({ method: method.toUpperCase(), headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' }, ...(method === 'post' ? { body: '{}' } : {}) })
      const asMetrics = await fetch(url, init(token))
      const body = (await asMetrics.json()) as { error?: { code: string } }
      t.equal(asMetrics.status, 403, `${method.toUpperCase()} ${path}`)
      t.equal(body.error?.code, 'forbidden', `${method.toUpperCase()} ${path}: forbidden`)
      // Renters read their own rentals, their own usage, receipts, a source's counts (a 404
      // without a rental, as for a source that does not exist) and the receipt log's proofs;
      // everywhere else a renter is refused like a metrics token.
      const renterReads = path.startsWith('/v1/rentals') || path === '/v1/usage' || path.includes('/receipts') || path.endsWith('/stats') || path.startsWith('/v1/log/')
      if (!renterReads) t.equal((await fetch(url, init(renter))).status, asMetrics.status, `${method.toUpperCase()} ${path}: as for a renter`)
      probed++
    }
  }
  t.ok(probed >= 15, `${probed} bearer routes probed`)
  const listed = await call(gw.url, 'GET', '/v1/admin/tokens?subject=probe&role=metrics', { token: gw.adminToken })
  t.equal(listed.body.data.length, 1, 'and its POST to /v1/admin/tokens made no token')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })).status, 200, 'the source is there for its creator')
})

t.test('/metrics refuses creator and renter tokens (403), and a missing, unknown or revoked token (401)', async (t) => {
  const src = await provision(gw)
  const renter = await issue('renter', 'r-metrics')
  for (const token of [src.creatorToken, renter.token]) {
    const res = await scrape(token)
    t.equal(res.status, 403)
    const body = (await res.json()) as { error: { code: string; message: string } }
    t.equal(body.error.code, 'forbidden')
    t.match(body.error.message, /admin token or a metrics token/)
  }
  t.equal((await scrape()).status, 401, 'no token')
  t.equal((await scrape('sgw_not_a_token')).status, 401, 'an unknown token')
  const scraper = await issue('metrics', 'revoked-scraper')
  t.equal((await scrape(scraper.token)).status, 200)
  t.equal((await call(gw.url, 'POST', `/v1/admin/tokens/${scraper.token_id}/revoke`, { token: gw.adminToken })).status, 200)
  t.equal((await scrape(scraper.token)).status, 401, 'revoked: refused from the next scrape')
})

t.test('the page a running gateway serves is valid Prometheus text, follows the naming rules, and counts what happened', async (t) => {
  const { token } = await issue('metrics', 'format-check')
  const src = await provision(gw)
  const before = parsePrometheusText(await (await scrape(token)).text())
  const acceptedBefore = sampleValue(before, 'sgw_ingest_accepted_total', { deduplicated: 'false' }) as number
  const refusedBefore = sampleValue(before, 'sgw_ingest_refused_total', { code: 'invalid_severity' }) ?? 0
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202)
  t.equal((await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' })))).status, 400)
  const text = await (await scrape(token)).text()
  const page = parsePrometheusText(text)
  t.same(namingBreaches(page), [])
  t.equal(sampleValue(page, 'sgw_ingest_accepted_total', { deduplicated: 'false' }), acceptedBefore + 1)
  t.equal(sampleValue(page, 'sgw_ingest_refused_total', { code: 'invalid_severity' }), refusedBefore + 1)
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_eventloop_lag_p99_seconds', 'sgw_event_loop_busy_seconds_total', 'sgw_journal_last_seq', 'sgw_verify_slots_taken']) {
    t.type(sampleValue(page, name), 'number', `${name} is served`)
  }
  t.equal(page.get('nodejs_gc_duration_seconds')?.type, 'histogram', 'garbage collection pauses, by kind')
  t.ok((sampleValue(page, 'nodejs_eventloop_lag_p99_seconds') as number) < 10, 'the event-loop delay is a real reading, in seconds')
  t.notOk(text.includes(src.sourceId) || text.includes(src.keyId) || text.includes(src.creatorId), 'no tenant id on the page')
  const buckets = await acceptLatencyBuckets(gw)
  t.same(buckets.map(([le]) => le), [0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 50, 100, 250, 500, 1000, 5000, Infinity], 'the ingest benchmark reads the bounds back in milliseconds')
  t.equal(buckets.at(-1)?.[1], sampleValue(page, 'sgw_ingest_accept_latency_seconds_count'))
})

t.test('pages are built at most METRICS_PAGES_PER_SECOND times a second, whoever asks: past that 429 rate_limited with Retry-After', async (t) => {
  const { token } = await issue('metrics', 'loop')
  const answers = await Promise.all(Array.from({ length: 3 * METRICS_PAGES_PER_SECOND }, () => scrape(token)))
  const statuses = answers.map((a) => a.status)
  const served = statuses.filter((s) => s === 200).length
  const limited = answers.filter((a) => a.status === 429)
  t.equal(served + limited.length, answers.length, `only 200 and 429: ${[...new Set(statuses)]}`)
  // Even if the burst straddles the start of a second, two windows' worth at most.
  t.ok(served >= 1 && served <= 2 * METRICS_PAGES_PER_SECOND, `${served} pages built`)
  t.ok(limited.length >= METRICS_PAGES_PER_SECOND, `${limited.length} refused`)
  t.equal(limited[0]?.headers.get('retry-after'), '1')
  t.equal(((await limited[0]?.json()) as { error: { code: string } }).error.code, 'rate_limited')
  await Promise.all(answers.map((a) => (a.bodyUsed ? undefined : a.body?.cancel())))
  await new Promise((resolve) => setTimeout(resolve, 1100))
  t.equal((await scrape(gw.adminToken)).status, 200, 'served again the next second')
})

t.test('a metrics token outlives a restart: the registry file keeps it', async (t) => {
  const first = await startTestGateway(t)
  const res = await call(first.url, 'POST', '/v1/admin/tokens', { token: first.adminToken, body: { role: 'metrics', subject: 'prometheus' } })
  t.equal(res.status, 201)
  await first.kill()
  const second = await startTestGateway(t, { dataDir: first.dataDir, adminToken: first.adminToken })
  t.equal((await fetch(`${second.url}/metrics`, { headers: { authorization: `Bearer ${res.body.data.token}` } })).status, 200)
  const listed = await call(second.url, 'GET', '/v1/admin/tokens?role=metrics', { token: second.adminToken })
  t.same(listed.body.data.map((r: any) => r.token_id), [res.body.data.token_id])
})
