import t from 'tap'
import { EVM_TOKEN, payload, provision, push } from '../helpers/api.js'
import { startTestGateway } from '../helpers/gateway-process.js'

const gw = await startTestGateway(t)
const src = await provision(gw)

const refused = async (overrides: Record<string, unknown>, code: string) => {
  const res = await push(gw, src.sign(payload(src.sourceId, overrides)))
  t.equal(res.status, 400, `${JSON.stringify(overrides).slice(0, 60)} → 400`)
  t.equal(res.body?.error?.code, code, `${code}: ${res.body?.error?.message}`)
}
const accepted = async (overrides: Record<string, unknown>) => {
  const res = await push(gw, src.sign(payload(src.sourceId, overrides)))
  t.equal(res.status, 202, `${JSON.stringify(overrides).slice(0, 60)} → 202 ${JSON.stringify(res.body?.error ?? '')}`)
}

t.test('a signal_id outside 8 to 128 characters of letters, digits, _, -, : is refused with invalid_signal_id', async () => {
  await refused({ signal_id: 'short7c' }, 'invalid_signal_id')
  await refused({ signal_id: 'x'.repeat(129) }, 'invalid_signal_id')
  await refused({ signal_id: 'has space' }, 'invalid_signal_id')
  await refused({ signal_id: 'slash/in/id' }, 'invalid_signal_id')
  await refused({ signal_id: 12345678 }, 'invalid_signal_id')
  await refused({ signal_id: undefined }, 'invalid_signal_id')
  await accepted({ signal_id: `a:b-c_${'d'.repeat(2)}` })
  await accepted({ signal_id: `${Date.now()}`.padEnd(128, 'z') })
})

t.test('a ts that is not ISO 8601 UTC is refused with invalid_timestamp', async () => {
  await refused({ ts: '2026-13-01T00:00:00Z' }, 'invalid_timestamp')
  await refused({ ts: 'now' }, 'invalid_timestamp')
  await refused({ ts: Date.now() }, 'invalid_timestamp')
  await refused({ ts: undefined }, 'invalid_timestamp')
})

t.test('a ts more than 300 seconds from the request timestamp is refused with invalid_timestamp (no backdating)', async () => {
  await refused({ ts: new Date(Date.now() - 301_000).toISOString() }, 'invalid_timestamp')
  await refused({ ts: new Date(Date.now() + 301_000).toISOString() }, 'invalid_timestamp')
  await accepted({ ts: new Date(Date.now() - 299_000).toISOString() })
})

t.test('ts is held to the request timestamp, not to the server clock: both within 300 s of now but 450 s apart is invalid_timestamp', async (t) => {
  const timestamp = new Date(Date.now() - 250_000).toISOString()
  const res = await push(gw, src.sign(payload(src.sourceId, { ts: new Date(Date.now() + 200_000).toISOString() }), { timestamp }))
  t.equal(res.status, 400)
  t.equal(res.body?.error?.code, 'invalid_timestamp', res.body?.error?.message)
  const close = await push(gw, src.sign(payload(src.sourceId, { ts: new Date(Date.now() - 400_000).toISOString() }), { timestamp }))
  t.equal(close.status, 202, 'and 400 s before now, but within 300 s of the request timestamp, is accepted')
})

t.test('a token that is not an address of a declared chain is refused with invalid_token', async () => {
  await refused({ token: 'not-an-address' }, 'invalid_token')
  await refused({ token: EVM_TOKEN.replace('a', 'A') }, 'invalid_token')
  await refused({ token: '0x' + 'g'.repeat(40) }, 'invalid_token')
  await refused({ token: undefined }, 'invalid_token')
  await accepted({ token: EVM_TOKEN })
  await accepted({ token: EVM_TOKEN.toLowerCase() })
})

t.test('a token valid only for an undeclared chain is refused with invalid_token', async () => {
  const solOnly = await provision(gw, { manifest: { ...(await import('../helpers/api.js')).MANIFEST, coverage: { chains: ['solana'] } } })
  const res = await push(gw, solOnly.sign(payload(solOnly.sourceId, { token: EVM_TOKEN })))
  t.equal(res.body?.error?.code, 'invalid_token')
})

t.test('a severity outside the manifest severity_levels is refused with invalid_severity', async () => {
  await refused({ severity: 'apocalyptic' }, 'invalid_severity')
  await refused({ severity: 'WARNING' }, 'invalid_severity')
  await refused({ severity: undefined }, 'invalid_severity')
  await accepted({ severity: 'critical' })
})

t.test('a confidence that is not an integer 0 to 100 is refused with invalid_confidence', async () => {
  for (const confidence of [101, -1, 50.5, '50', true, null]) await refused({ confidence }, 'invalid_confidence')
  await accepted({ confidence: 0 })
  await accepted({ confidence: 100 })
  await accepted({ confidence: undefined })
})

t.test('a note longer than 280 characters is refused with invalid_note', async () => {
  await refused({ note: 'n'.repeat(281) }, 'invalid_note')
  await refused({ note: 42 }, 'invalid_note')
  await accepted({ note: 'n'.repeat(280) })
  await accepted({ note: '🚀'.repeat(280) })
  await accepted({ note: undefined })
})

t.test('an unknown field is refused with invalid_body', async () => {
  await refused({ extra: 1 }, 'invalid_body')
})
