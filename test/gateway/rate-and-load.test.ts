import t from 'tap'
import { call, MANIFEST, payload, provision, push } from '../helpers/api.js'
import { startGateway } from '../helpers/gateway-process.js'

t.test('pushing above max_rate is refused with 429 rate_limited and Retry-After; sustained over-rate flags the source', async (t) => {
  const gw = await startGateway(t, { env: { OVER_RATE_FLAG_MINUTES: '1' } })
  // 5 per minute, burst 5: the provisioning test signal takes one token.
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 5, per: 'minute', burst: 5 } } })
  const statuses: number[] = []
  let limited
  for (let i = 0; i < 6; i++) {
    const res = await push(gw, src.sign(payload(src.sourceId)))
    statuses.push(res.status)
    if (res.status === 429) limited = res
  }
  t.same(statuses, [202, 202, 202, 202, 429, 429])
  t.equal(limited!.body.error.code, 'rate_limited')
  const retryAfter = Number(limited!.headers.get('retry-after'))
  t.ok(retryAfter >= 1 && retryAfter <= 12, `Retry-After ${retryAfter}s is when a token is back (one per 12 s)`)
  const dedup = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(dedup.status, 429, 'still limited')
  const status = await call(gw.url, 'GET', `/v1/byo/sources/${src.sourceId}`, { token: src.creatorToken })
  t.equal(status.body.data.flagged_for_review, true, 'flagged for review')
})

t.test('a retry of an accepted signal is not charged to the rate limit', async (t) => {
  const gw = await startGateway(t)
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 2, per: 'hour', burst: 2 } } })
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  for (let i = 0; i < 3; i++) t.equal((await push(gw, src.sign(p))).status, 202, 'deduplicated accept')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 429)
})

t.test('with the verify queue full the edge sheds with 503 overloaded and Retry-After, and recovers', async (t) => {
  const gw = await startGateway(t, { env: { VERIFY_QUEUE_LIMIT: '1', VERIFY_THREADS: '1', VERIFY_BATCH: '1' } })
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 100_000, per: 'second' } } })
  const results = await Promise.all(Array.from({ length: 200 }, () => push(gw, src.sign(payload(src.sourceId)))))
  const shed = results.filter((r) => r.status === 503)
  t.ok(shed.length > 0, `${shed.length} of 200 shed`)
  t.equal(shed[0]!.body.error.code, 'overloaded')
  t.equal(shed[0]!.headers.get('retry-after'), '1')
  t.ok(results.every((r) => r.status === 202 || r.status === 503), 'every request answered, with 202 or 503 only')
  t.ok(results.some((r) => r.status === 202), 'some were accepted')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'serves again once the burst is over')
})

t.test('a client that leaves before sending its body gives its verification slot back at once', async (t) => {
  const { connect } = await import('node:net')
  const gw = await startGateway(t, { env: { VERIFY_QUEUE_LIMIT: '2', BODY_TIMEOUT_MS: '60000' } })
  const src = await provision(gw)
  const heads = [0, 1].map(() => {
    const s = src.sign(payload(src.sourceId))
    const head = [`POST ${s.path} HTTP/1.1`, 'Host: x', ...Object.entries(s.headers).map(([k, v]) => `${k}: ${v}`), `content-length: ${s.body.length}`].join('\r\n')
    return `${head}\r\n\r\n`
  })
  const sockets = heads.map((head) => {
    const socket = connect(gw.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write(head)
    return socket
  })
  await new Promise((r) => setTimeout(r, 300))
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 503, 'both slots are held by the bodies in transit')
  for (const s of sockets) s.destroy()
  await new Promise((r) => setTimeout(r, 300))
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'free again long before the 60 s body deadline')
})

t.test('a body abandoned mid-upload, a body too slow, and a body source_id mismatch each give their slot back', async (t) => {
  const { connect } = await import('node:net')
  const gw = await startGateway(t, { env: { VERIFY_QUEUE_LIMIT: '2', BODY_TIMEOUT_MS: '400' } })
  const src = await provision(gw)
  const head = (s: ReturnType<typeof src.sign>) =>
    [`POST ${s.path} HTTP/1.1`, 'Host: x', ...Object.entries(s.headers).map(([k, v]) => `${k}: ${v}`), `content-length: ${s.body.length}`].join('\r\n') + '\r\n\r\n'
  // Two uploads that stop half-way: one abandoned by its client, one left to time out.
  const sockets = [0, 1].map(() => {
    const s = src.sign(payload(src.sourceId))
    const socket = connect(gw.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.write(head(s) + s.body.subarray(0, 20).toString())
    return socket
  })
  await new Promise((r) => setTimeout(r, 150))
  sockets[0]!.destroy()
  await new Promise((r) => setTimeout(r, 800))
  sockets[1]!.destroy()
  for (let i = 0; i < 3; i++) {
    const res = await push(gw, src.sign(payload('src_someone_else')))
    t.equal(res.body.error.code, 'invalid_source_id', 'a body source_id mismatch')
  }
  const res = await push(gw, src.sign(payload(src.sourceId)))
  t.equal(res.status, 202, 'both slots are free again after the abandoned, the timed-out and the mismatched bodies')
})

t.test('field errors are reported before the rate limit: an invalid signal from a limited source gets 400, not 429', async (t) => {
  const gw = await startGateway(t)
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 1, per: 'hour', burst: 1 } } })
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 429, 'the bucket is empty (the test signal took the only token)')
  const res = await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' })))
  t.equal(res.status, 400)
  t.equal(res.body.error.code, 'invalid_severity')
})
