import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { call, provision } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

/**
 * No ClickHouse server can run here, and the embedded engine cannot be made to fail on
 * cue, so this stands in for a server at CLICKHOUSE_URL: a real HTTP server that answers
 * the schema check as a migrated store (schema version 1) and every other statement with
 * an empty success, until it is told to answer 503 like a proxy in front of a server that
 * went down. The gateway's own client, error mapping and routes are the real ones.
 */
let down = false
const clickhouse = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    if (down) {
      res.writeHead(503, { 'content-type': 'text/plain' }).end('no healthy upstream')
      return
    }
    const text = `${decodeURIComponent(req.url ?? '')} ${Buffer.concat(chunks).toString()}`
    res.writeHead(200, { 'content-type': 'text/plain' })
    res.end(text.includes('max(version)') ? '{"v":1}\n' : req.url === '/ping' ? 'Ok.\n' : '')
  })
})
await new Promise<void>((resolve) => clickhouse.listen(0, '127.0.0.1', resolve))
t.teardown(() => new Promise<void>((resolve) => clickhouse.close(() => resolve())))
const gw = await startTestGateway(t, { env: { CLICKHOUSE_URL: `http://127.0.0.1:${(clickhouse.address() as AddressInfo).port}/default`, STATUS_CACHE_MS: '0' } })
const src = await provision(gw)
const scorer = (await call(gw.url, 'POST', '/v1/admin/tokens', { token: gw.adminToken, body: { role: 'scorer', subject: 'down-scorer' } })).body.data.token as string
const scoredAt = new Date(Date.now() - 60_000).toISOString()
const batch = [{ receipt_id: receiptIdOf(src.sourceId, 'sig-1'), window_start: scoredAt, window_end: scoredAt, baseline: 0, outcome: 'hit', scored_at: scoredAt }]

t.test('with the receipt store up, both endpoints answer', async (t) => {
  const posted = await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer, body: batch })
  t.equal(posted.status, 200)
  t.same(posted.body.data.refused.map((r: { code: string }) => r.code), ['unknown_receipt'], 'the stand-in knows no receipt')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/status`)).status, 200)
})

t.test('with the receipt store down: 503 with Retry-After on both, the process serving on; up again, answered again', async (t) => {
  down = true
  const posted = await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer, body: batch })
  t.equal(posted.status, 503)
  t.equal(posted.body.error.code, 'overloaded')
  t.match(posted.body.error.message, /receipt store is unavailable/)
  t.equal(posted.headers.get('retry-after'), '5')
  const status = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/status`)
  t.equal(status.status, 503)
  t.equal(status.body.error.code, 'overloaded')
  t.equal(status.headers.get('retry-after'), '5')
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })).status, 200, 'the control plane serves on')
  down = false
  t.equal((await call(gw.url, 'POST', '/v1/scoring/outcomes', { token: scorer, body: batch })).status, 200)
  t.equal((await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}/status`)).status, 200, 'a failure is not kept: the next request asks again')
})
