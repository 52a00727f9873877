import t from 'tap'
import { call, MANIFEST, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rawRequest, requestBytes } from '../helpers/raw-http.js'
import { generateCreatorKey } from '../../harness/signed-push.js'

t.test('pushing above max_rate is refused with 429 rate_limited and Retry-After; a burst of seconds does not flag the source', async (t) => {
  const gw = await startTestGateway(t, { env: { OVER_RATE_FLAG_MINUTES: '1' } })
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
  // Sustained over-rate (a minute of it here) is tested with a clock in test/pipeline/ingest-pipeline.test.ts.
  t.equal(status.body.data.flagged_for_review, false, 'not flagged for review: seconds of over-rate are not sustained')
})

t.test('a retry of an accepted signal is not charged to the rate limit', async (t) => {
  const gw = await startTestGateway(t)
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 2, per: 'hour', burst: 2 } } })
  const p = payload(src.sourceId)
  t.equal((await push(gw, src.sign(p))).status, 202)
  for (let i = 0; i < 3; i++) t.equal((await push(gw, src.sign(p))).status, 202, 'deduplicated accept')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 429)
})

t.test('with the verify queue full the edge sheds with 503 overloaded and Retry-After, and recovers', async (t) => {
  const gw = await startTestGateway(t, { env: { VERIFY_QUEUE_LIMIT: '1', VERIFY_THREADS: '1', VERIFY_BATCH: '1' } })
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 1000, per: 'second', burst: 10_000 } } })
  const results = await Promise.all(Array.from({ length: 200 }, () => push(gw, src.sign(payload(src.sourceId)))))
  const shed = results.filter((r) => r.status === 503)
  t.ok(shed.length > 0, `${shed.length} of 200 shed`)
  t.equal(shed[0]!.body.error.code, 'overloaded')
  t.equal(shed[0]!.headers.get('retry-after'), '1')
  t.ok(results.every((r) => r.status === 202 || r.status === 503), 'every request answered, with 202 or 503 only')
  t.ok(results.some((r) => r.status === 202), 'some were accepted')
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'serves again once the burst is over')
})

/** Where a flood comes from: the local address it connects from, and header lines (a proxy's X-Forwarded-For). */
interface FloodOrigin {
  from?: string
  headers?: Record<string, string>
}

/**
 * Connections that each send one forged push over and over, as fast as the answers
 * come: signed once with a key the source does not hold, so the flood costs the client
 * no signing while each request still costs the gateway a verification (nonces are
 * claimed only after it). Returns the answers per status and a stop function.
 */
async function forgedFlood(gw: { port: number }, src: Awaited<ReturnType<typeof provision>>, connections: number, { from = '127.0.0.1', headers = {} }: FloodOrigin = {}) {
  const { connect } = await import('node:net')
  const s = src.sign(payload(src.sourceId), { key: generateCreatorKey() })
  const head = [`POST ${s.path} HTTP/1.1`, 'Host: x', ...Object.entries({ ...s.headers, ...headers }).map(([k, v]) => `${k}: ${v}`), `content-length: ${s.body.length}`].join('\r\n')
  const request = Buffer.concat([Buffer.from(`${head}\r\n\r\n`), s.body])
  const statuses = new Map<string, number>()
  let flooding = true
  const sockets = Array.from({ length: connections }, () => {
    // Linux routes all of 127.0.0.0/8 to the loopback: `from` can be any of it.
    const socket = connect({ port: gw.port, host: '127.0.0.1', localAddress: from }, () => socket.write(request))
    socket.on('error', () => undefined)
    let carry = ''
    socket.on('data', (d: Buffer) => {
      const text = carry + d.toString('latin1')
      let last = 0
      for (const m of text.matchAll(/HTTP\/1\.1 (\d{3}) /g)) {
        statuses.set(m[1] as string, (statuses.get(m[1] as string) ?? 0) + 1)
        last = (m.index ?? 0) + m[0].length
        if (flooding) socket.write(request)
      }
      carry = text.slice(Math.max(last, text.length - 16))
    })
    return socket
  })
  return {
    statuses,
    stop: async () => {
      flooding = false
      await new Promise((r) => setTimeout(r, 200))
      for (const socket of sockets) socket.destroy()
    },
  }
}

/**
 * 40 pushes of `pusher` from 127.0.0.1, with `pushHeaders`, while 64 connections from
 * `origin` flood forged signatures under `flooded`.
 */
async function pushesDuringFlood(gw: { url: string; port: number }, flooded: Awaited<ReturnType<typeof provision>>, pusher: Awaited<ReturnType<typeof provision>>, origin?: FloodOrigin, pushHeaders: Record<string, string> = {}) {
  const flood = await forgedFlood(gw, flooded, 64, origin)
  await new Promise((r) => setTimeout(r, 300))
  const statuses: number[] = []
  for (let i = 0; i < 40; i++) {
    const signed = pusher.sign(payload(pusher.sourceId))
    statuses.push((await push(gw, { ...signed, headers: { ...signed.headers, ...pushHeaders } })).status)
  }
  await flood.stop()
  return { flood, statuses }
}

t.test('a flood of forged signatures under one source takes at most its share of the verification slots: another source pushing meanwhile is never shed', async (t) => {
  // 16 slots: a quarter (4) per source. No wait bound, so only the slots can shed.
  const gw = await startTestGateway(t, { env: { VERIFY_QUEUE_LIMIT: '16', VERIFY_THREADS: '1', VERIFY_BATCH: '1', VERIFY_MAX_WAIT_MS: '60000' } })
  const flooded = await provision(gw)
  const victim = await provision(gw)
  const { flood, statuses } = await pushesDuringFlood(gw, flooded, victim)
  t.same(statuses, Array(40).fill(202), 'all 40 pushes of the other source accepted during the flood')
  t.ok((flood.statuses.get('401') ?? 0) > 0, `${flood.statuses.get('401')} forged requests verified and refused with 401`)
  t.ok((flood.statuses.get('503') ?? 0) > 0, `${flood.statuses.get('503')} forged requests shed past their share`)
  t.same([...flood.statuses.keys()].filter((s) => s !== '401' && s !== '503'), [], 'the flood got 401 or 503 only')
})

t.test('a forged flood from addresses the source never proved leaves its proven address a lane of its own: the source itself is never shed', async (t) => {
  const gw = await startTestGateway(t, { env: { VERIFY_QUEUE_LIMIT: '16', VERIFY_THREADS: '1', VERIFY_BATCH: '1', VERIFY_MAX_WAIT_MS: '60000' } })
  // Its test signal, sent from 127.0.0.1, proves that address for the source.
  const src = await provision(gw)
  const { flood, statuses } = await pushesDuringFlood(gw, src, src, { from: '127.0.0.2' })
  t.same(statuses, Array(40).fill(202), 'all 40 pushes from the proven address accepted during a flood under the same source and key')
  t.ok((flood.statuses.get('401') ?? 0) > 0, `${flood.statuses.get('401')} forged requests verified and refused with 401`)
  t.ok((flood.statuses.get('503') ?? 0) > 0, `${flood.statuses.get('503')} forged requests shed past their lane`)
})

t.test('behind a trusted proxy the lanes follow the clients it names: a forged flood relayed for another client leaves the creator its lane', async (t) => {
  const gw = await startTestGateway(t, { env: { VERIFY_QUEUE_LIMIT: '16', VERIFY_THREADS: '1', VERIFY_BATCH: '1', VERIFY_MAX_WAIT_MS: '60000', TRUSTED_PROXIES: '127.0.0.1' } })
  const src = await provision(gw)
  // Every connection comes from the proxy, 127.0.0.1; only X-Forwarded-For tells the clients apart.
  const creator = { 'x-forwarded-for': '198.51.100.7' }
  const first = src.sign(payload(src.sourceId))
  t.equal((await push(gw, { ...first, headers: { ...first.headers, ...creator } })).status, 202, 'the creator proves its address through the proxy')
  const { flood, statuses } = await pushesDuringFlood(gw, src, src, { headers: { 'x-forwarded-for': '203.0.113.66' } }, creator)
  t.same(statuses, Array(40).fill(202), 'all 40 pushes relayed for the creator accepted during a flood relayed for another client')
  t.ok((flood.statuses.get('503') ?? 0) > 0, `${flood.statuses.get('503')} forged requests shed past their lane`)
})

t.test('only a fresh, validly signed request proves its address: a forged signature, an exact replay or a stale timestamp does not', async (t) => {
  const gw = await startTestGateway(t)
  const src = await provision(gw)
  const proven = async () => {
    const page = await (await fetch(`${gw.url}/metrics`, { headers: { authorization: `Bearer ${gw.adminToken}` } })).text()
    return Number(/^sgw_proven_addresses (\d+)$/m.exec(page)?.[1])
  }
  t.equal(await proven(), 1, 'the test signal from 127.0.0.1 proved that address for the key')
  const bytes = (s: ReturnType<typeof src.sign>) => requestBytes(s.path, [...Object.entries(s.headers), ['content-length', String(s.body.length)]], s.body)
  const from2 = (s: ReturnType<typeof src.sign>) => rawRequest(gw.port, [bytes(s)], { localAddress: '127.0.0.2' })
  const accepted = src.sign(payload(src.sourceId))
  t.equal((await push(gw, accepted)).status, 202)
  const stale = new Date(Date.now() - 400_000).toISOString()
  const attempts: Array<[string, ReturnType<typeof src.sign>, string]> = [
    ['forged', src.sign(payload(src.sourceId), { key: generateCreatorKey() }), 'invalid_signature'],
    ['replayed', accepted, 'replayed_nonce'],
    ['stale', src.sign(payload(src.sourceId, { ts: stale }), { timestamp: stale }), 'stale_timestamp'],
  ]
  for (const [what, signed, code] of attempts) {
    const res = await from2(signed)
    t.equal(res?.body?.error?.code, code, what)
    t.equal(await proven(), 1, `a ${what} request from 127.0.0.2 proves nothing`)
  }
  t.equal((await from2(src.sign(payload(src.sourceId))))?.status, 202)
  t.equal(await proven(), 2, 'a fresh signed request from 127.0.0.2 proves it')
})

/** Connections that each send a signed request head and hold its body back; `answers` collects what each got. */
async function holdBodies(gw: { port: number }, src: Awaited<ReturnType<typeof provision>>, n: number, sendPart = 0, keyId?: string, from = '127.0.0.1') {
  const { connect } = await import('node:net')
  const answers: string[] = Array.from({ length: n }, () => '')
  const sockets = answers.map((_, i) => {
    const s = src.sign(payload(src.sourceId), keyId === undefined ? {} : { keyId })
    const head = [`POST ${s.path} HTTP/1.1`, 'Host: x', ...Object.entries(s.headers).map(([k, v]) => `${k}: ${v}`), `content-length: ${s.body.length}`].join('\r\n')
    const socket = connect({ port: gw.port, host: '127.0.0.1', localAddress: from })
    socket.on('error', () => undefined)
    socket.on('data', (d: Buffer) => (answers[i] += d.toString('latin1')))
    socket.write(`${head}\r\n\r\n${s.body.subarray(0, sendPart).toString()}`)
    return socket
  })
  await new Promise((r) => setTimeout(r, 300))
  return { sockets, answers, answered: () => answers.filter((a) => a !== '') }
}

t.test('bodies held back take no verification slot: past BODY_SLOW_MAX, or past the share of their creator, they get 503, and requests that send head and body together are still accepted', async (t) => {
  // 16 places, an eighth of them (2) per creator.
  const gw = await startTestGateway(t, { env: { VERIFY_QUEUE_LIMIT: '2', BODY_SLOW_MAX: '16', BODY_TIMEOUT_MS: '60000' } })
  const src = await provision(gw)
  const held = await holdBodies(gw, src, 5)
  const refused = held.answered()
  t.equal(refused.length, 3, 'three of five held-back bodies of one creator are refused at once')
  for (const a of refused) t.match(a, /^HTTP\/1\.1 503 [^]*retry-after: 1[^]*"code":"overloaded"/i)
  for (let i = 0; i < 3; i++) t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'a whole request is accepted meanwhile')
  // One at a time: each provisioning sends a test signal, and the verification queue holds 2.
  const others = []
  for (let i = 0; i < 7; i++) others.push(await provision(gw))
  const othersHeld = await Promise.all(others.map((o) => holdBodies(gw, o, 2)))
  t.same(othersHeld.flatMap((h) => h.answered()), [], 'seven other creators still get their two places each')
  const last = await holdBodies(gw, others[0]!, 1)
  t.match(last.answered()[0], /^HTTP\/1\.1 503 [^]*"code":"overloaded"/, 'with all 16 places held, the next is refused')
  for (const s of [...held.sockets, ...othersHeld.flatMap((h) => h.sockets), ...last.sockets]) s.destroy()
  await new Promise((r) => setTimeout(r, 200))
  const again = await holdBodies(gw, src, 2)
  t.same(again.answered(), [], 'clients that left gave their places back long before the 60 s body deadline')
  // 127.0.0.2 never proved itself for the source: its held bodies are counted apart, so
  // they neither take the two places of the proven address nor are refused for them.
  const unproven = await holdBodies(gw, src, 3, 0, undefined, '127.0.0.2')
  t.equal(unproven.answered().length, 1, 'an address the creator never proved gets two places of its own beside the proven ones')
  for (const s of [...again.sockets, ...unproven.sockets]) s.destroy()
})

t.test('a body abandoned mid-upload gives its place back at once, and a body too slow at its deadline', async (t) => {
  const gw = await startTestGateway(t, { env: { BODY_SLOW_MAX: '1', BODY_TIMEOUT_MS: '60000' } })
  const src = await provision(gw)
  const abandoned = await holdBodies(gw, src, 1, 20)
  t.same(abandoned.answered(), [], 'reading')
  abandoned.sockets[0]!.destroy()
  await new Promise((r) => setTimeout(r, 200))
  const next = await holdBodies(gw, src, 1, 20)
  t.same(next.answered(), [], 'the place is free again long before the 60 s deadline')
  next.sockets[0]!.destroy()

  const slow = await startTestGateway(t, { env: { BODY_SLOW_MAX: '1', BODY_TIMEOUT_MS: '400' } })
  const src2 = await provision(slow)
  const late = await holdBodies(slow, src2, 1, 20)
  await new Promise((r) => setTimeout(r, 800))
  t.match(late.answers[0], /^HTTP\/1\.1 400 [^]*"code":"invalid_body"/, 'the slow one timed out with 400 invalid_body')
  late.sockets[0]!.destroy()
  const after = await holdBodies(slow, src2, 1, 20)
  t.same(after.answered(), [], 'and gave its place back')
  after.sockets[0]!.destroy()
})

t.test('heads that fail the key or skew check wait for their bodies only in places of their own: past those they get their refusal at once, and a signed head still finds its place', async (t) => {
  // 8 places: an eighth of them (1) per creator, and 1 more for heads that failed a check.
  const gw = await startTestGateway(t, { env: { BODY_SLOW_MAX: '8', BODY_TIMEOUT_MS: '60000' } })
  const src = await provision(gw)
  const unknown = await holdBodies(gw, src, 5, 0, 'key_unknownunknown1234')
  t.equal(unknown.answered().length, 4, 'one waits for its body, the other four are answered at once')
  for (const a of unknown.answered()) t.match(a, /^HTTP\/1\.1 401 [^]*"code":"unknown_key"/)
  const valid = await holdBodies(gw, src, 1)
  t.same(valid.answered(), [], 'the creator place is still free for a signed head')
  for (const s of [...unknown.sockets, ...valid.sockets]) s.destroy()
})

t.test('precedence does not depend on packets: a body sent after its head is still checked for its source_id before the key', async (t) => {
  const gw = await startTestGateway(t)
  const src = await provision(gw)
  const { connect } = await import('node:net')
  for (const split of [false, true]) {
    const s = src.sign(payload(src.sourceId, { source_id: 'src_someone_else' }), { keyId: 'key_unknownunknown1234' })
    const head = [`POST ${s.path} HTTP/1.1`, 'Host: x', ...Object.entries(s.headers).map(([k, v]) => `${k}: ${v}`), `content-length: ${s.body.length}`].join('\r\n')
    const socket = connect(gw.port, '127.0.0.1')
    let answer = ''
    socket.on('data', (d: Buffer) => (answer += d.toString('latin1')))
    await new Promise((r) => socket.once('connect', r))
    if (split) {
      socket.write(`${head}\r\n\r\n`)
      await new Promise((r) => setTimeout(r, 100))
      socket.write(s.body)
    } else socket.write(Buffer.concat([Buffer.from(`${head}\r\n\r\n`), s.body]))
    for (let waited = 0; !answer.includes('"request_id"') && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20))
    socket.destroy()
    t.match(answer, /^HTTP\/1\.1 400 [^]*"code":"invalid_source_id"/, split ? 'body 100 ms after the head' : 'body with the head')
  }
})

t.test('field errors are reported before the rate limit: an invalid signal from a limited source gets 400, not 429', async (t) => {
  const gw = await startTestGateway(t)
  const src = await provision(gw, { manifest: { ...MANIFEST, max_rate: { rate: 1, per: 'hour', burst: 1 } } })
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 429, 'the bucket is empty (the test signal took the only token)')
  const res = await push(gw, src.sign(payload(src.sourceId, { severity: 'nope' })))
  t.equal(res.status, 400)
  t.equal(res.body.error.code, 'invalid_severity')
})
