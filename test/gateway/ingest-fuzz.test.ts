import fc from 'fast-check'
import t from 'tap'
import { payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'
import { rawRequest, requestBytes } from '../helpers/raw-http.js'

/**
 * Random damage to a valid signed push — headers dropped, repeated or rewritten, body
 * bytes flipped, cut or extended — must only ever get a client error (or a 202 when
 * the damage happened to be harmless), never a 5xx other than shedding, and the
 * gateway must keep serving.
 */
const gw = await startTestGateway(t)
const src = await provision(gw)

type Mutation =
  | { kind: 'drop'; header: number }
  | { kind: 'repeat'; header: number }
  | { kind: 'rewrite'; header: number; value: string }
  | { kind: 'flip'; at: number; byte: number }
  | { kind: 'cut'; at: number }
  | { kind: 'append'; bytes: Uint8Array }

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant('drop' as const), header: fc.nat(7) }),
  fc.record({ kind: fc.constant('repeat' as const), header: fc.nat(7) }),
  fc.record({ kind: fc.constant('rewrite' as const), header: fc.nat(7), value: fc.string({ unit: 'grapheme-ascii', maxLength: 100 }) }),
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(400), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('cut' as const), at: fc.nat(400) }),
  fc.record({ kind: fc.constant('append' as const), bytes: fc.uint8Array({ maxLength: 40 }) }),
)

t.test('property: damaged pushes get 4xx (or 202, or a shed 503), never a fault, and the gateway keeps serving', async (t) => {
  const seen = new Map<number, number>()
  await fc.assert(
    fc.asyncProperty(fc.array(mutation, { minLength: 1, maxLength: 3 }), async (mutations) => {
      const signed = src.sign(payload(src.sourceId))
      let headers = Object.entries(signed.headers) as Array<[string, string]>
      let body = Buffer.from(signed.body)
      for (const m of mutations) {
        const i = 'header' in m ? m.header % headers.length : 0
        if (m.kind === 'drop') headers = headers.filter((_, j) => j !== i)
        else if (m.kind === 'repeat') headers = [...headers, headers[i]!]
        else if (m.kind === 'rewrite') headers = headers.map((h, j) => (j === i ? [h[0], m.value.replace(/[\r\n]/g, '')] : h))
        else if (m.kind === 'flip' && body.length > 0) body[m.at % body.length] = m.byte
        else if (m.kind === 'cut') body = body.subarray(0, m.at % (body.length + 1))
        else if (m.kind === 'append') body = Buffer.concat([body, m.bytes])
        if (headers.length === 0) headers = [['x-empty', '1']]
      }
      // Only the answer counts here, not whether the connection stays open: no 100 ms wait for a close.
      const res = await rawRequest(gw.port, [requestBytes(signed.path, [...headers, ['content-length', String(body.length)]], body)], { closeWaitMs: 0 })
      if (res === undefined) return false
      seen.set(res.status, (seen.get(res.status) ?? 0) + 1)
      const fine = res.status === 202 || (res.status >= 400 && res.status < 500) || (res.status === 503 && res.body?.error?.code === 'overloaded')
      return fine && typeof res.body?.ok === 'boolean'
    }),
    { numRuns: 150 },
  )
  t.ok(seen.size > 1, `statuses seen: ${JSON.stringify([...seen])}`)
  t.equal((await push(gw, src.sign(payload(src.sourceId)))).status, 202, 'still serving')
})
