import t from 'tap'
import { canonicalToken, FILTER_LIMITS, parseDeliveryFilter, passesFilter } from '../../schemas/index.js'

/** A rental's delivery filter, in-process: how a body is read and stored, and which signals pass. */

const LEVELS = ['info', 'warning', 'critical']
const EVM = '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'
const SOL = 'So11111111111111111111111111111111111111112'
const signal = (over: Partial<{ severity: string; token: string; confidence: number | null }> = {}) => ({ severity: 'warning', token: SOL, confidence: 80, ...over })

t.test('EVM addresses compare in lower case, Solana addresses exactly', async (t) => {
  t.equal(canonicalToken(EVM), EVM.toLowerCase())
  t.equal(canonicalToken(SOL), SOL, 'base58 is case-sensitive: left as it is')
  const filter = { tokens: [canonicalToken(EVM)] }
  t.ok(passesFilter(filter, signal({ token: EVM })), 'checksummed')
  t.ok(passesFilter(filter, signal({ token: EVM.toLowerCase() })), 'lower case')
  t.ok(passesFilter(filter, signal({ token: EVM.toUpperCase().replace('0X', '0x') })), 'upper case')
  t.notOk(passesFilter({ tokens: [SOL] }, signal({ token: SOL.toLowerCase() })), 'another Solana address')
})

t.test('a signal passes when it passes every field given; no filter passes everything', async (t) => {
  t.ok(passesFilter(null, signal()))
  t.ok(passesFilter(undefined, signal()))
  t.ok(passesFilter({}, signal()))
  t.ok(passesFilter({ severity: ['warning'] }, signal()))
  t.notOk(passesFilter({ severity: ['critical'] }, signal()))
  t.ok(passesFilter({ min_confidence: 80 }, signal()), 'at least: equal passes')
  t.notOk(passesFilter({ min_confidence: 81 }, signal()))
  t.notOk(passesFilter({ min_confidence: 0 }, signal({ confidence: null })), 'no confidence never passes a min_confidence')
  t.notOk(passesFilter({ severity: ['warning'], min_confidence: 90 }, signal()), 'every field must pass')
})

t.test('a filter body is stored deduplicated and canonical, or refused naming the problem', async (t) => {
  t.same(parseDeliveryFilter({ severity: ['info', 'info'], tokens: [EVM, EVM.toLowerCase(), SOL], min_confidence: 0 }, LEVELS), { ok: true, value: { severity: ['info'], tokens: [EVM.toLowerCase(), SOL], min_confidence: 0 } })
  t.same(parseDeliveryFilter({}, LEVELS), { ok: true, value: {} })
  const refused: [unknown, RegExp][] = [
    [null, /must be an object/],
    [{ severity: 'info' }, /list of 1 to 16/],
    [{ severity: Array.from({ length: FILTER_LIMITS.severities + 1 }, () => 'info') }, /list of 1 to 16/],
    [{ severity: ['debug'] }, /not one of the source's severity_levels \(info, warning, critical\)/],
    [{ tokens: [] }, /list of 1 to 100/],
    [{ tokens: Array.from({ length: FILTER_LIMITS.tokens + 1 }, () => SOL) }, /list of 1 to 100/],
    [{ tokens: [42] }, /not a token address/],
    [{ tokens: ['0x123'] }, /not a token address/],
    [{ min_confidence: -1 }, /integer from 0 to 100/],
    [{ min_confidence: '50' }, /integer from 0 to 100/],
    [{ severity: ['info'], extra: true }, /unknown field "extra"/],
  ]
  for (const [body, why] of refused) {
    const result = parseDeliveryFilter(body, LEVELS)
    t.equal(result.ok, false, JSON.stringify(body).slice(0, 60))
    if (!result.ok) t.match(result.problem, why)
  }
})
