import fc from 'fast-check'
import t from 'tap'
import { backoffMs, DEFAULT_RETRY, generateCreatorKeyPem, isRetryableStatus, loadCreatorKey, nextDelayMs, retryAfterMs, SourceClient } from '@signal-ingest-gateway/sdk'
import { fillRetryOptions } from '../../sdk/retry-policy.js'

t.test('the defaults: 60 s deadline, 10 s per attempt, backoff ceilings from 250 ms doubling to 30 s', async (t) => {
  t.same(DEFAULT_RETRY, { deadlineMs: 60_000, attemptTimeoutMs: 10_000, baseDelayMs: 250, factor: 2, maxDelayMs: 30_000 })
})

t.test('429 and every 5xx are retried; every other status is final', async (t) => {
  for (const status of [429, 500, 502, 503, 504, 599]) t.ok(isRetryableStatus(status), `${status}`)
  for (const status of [200, 202, 301, 307, 400, 401, 403, 404, 405, 409, 413, 428, 431, 600]) t.notOk(isRetryableStatus(status), `${status}`)
})

t.test('Retry-After is read as delay-seconds or as an HTTP-date', async (t) => {
  const now = Date.parse('2030-01-01T00:00:00Z')
  t.equal(retryAfterMs('1', now), 1000)
  t.equal(retryAfterMs(' 60 ', now), 60_000)
  t.equal(retryAfterMs('0', now), 0)
  t.equal(retryAfterMs('Tue, 01 Jan 2030 00:00:05 GMT', now), 5000)
  t.equal(retryAfterMs('Mon, 31 Dec 2029 23:59:00 GMT', now), 0, 'a date passed: no wait')
  for (const bad of [null, '', '-1', '1.5', '1e3', 'soon', '12345678901']) t.equal(retryAfterMs(bad, now), undefined, `${JSON.stringify(bad)}`)
})

t.test('backoff is full jitter under min(max, base * factor^n)', async (t) => {
  const o = fillRetryOptions({ baseDelayMs: 100, factor: 3, maxDelayMs: 2000 })
  t.equal(backoffMs(0, o, () => 0), 0)
  t.equal(backoffMs(0, o, () => 0.999999), 99)
  t.equal(backoffMs(1, o, () => 0.999999), 299)
  t.equal(backoffMs(2, o, () => 0.5), 450)
  t.equal(backoffMs(3, o, () => 0.999999), 1999, 'capped at maxDelayMs')
  t.equal(backoffMs(50, o, () => 0.999999), 1999)
  fc.assert(
    fc.property(fc.nat(60), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (n, r) => {
      const d = backoffMs(n, DEFAULT_RETRY, () => r)
      return Number.isInteger(d) && d >= 0 && d < Math.min(30_000, 250 * 2 ** n)
    }),
  )
})

t.test('429 and 503 wait what Retry-After says plus at most a tenth (at most 1 s); other answers back off', async (t) => {
  const o = DEFAULT_RETRY
  const now = Date.now()
  t.equal(nextDelayMs({ status: 429, retryAfter: '2' }, 0, o, now, () => 0), 2000)
  t.equal(nextDelayMs({ status: 429, retryAfter: '2' }, 0, o, now, () => 0.999999), 2199)
  t.equal(nextDelayMs({ status: 503, retryAfter: '60' }, 0, o, now, () => 0.999999), 60_999, 'the jitter is at most 1 s')
  t.equal(nextDelayMs({ status: 503, retryAfter: '0' }, 5, o, now, () => 0.999999), 0)
  t.equal(nextDelayMs({ status: 503, retryAfter: null }, 2, o, now, () => 0.999999), 999, 'no Retry-After: backoff')
  t.equal(nextDelayMs({ status: 503, retryAfter: 'later' }, 0, o, now, () => 0.999999), 249, 'unreadable: backoff')
  t.equal(nextDelayMs({ status: 500, retryAfter: '30' }, 0, o, now, () => 0.999999), 249, 'only 429 and 503 are told to wait')
  t.equal(nextDelayMs({ status: undefined, retryAfter: null }, 1, o, now, () => 0.999999), 499, 'a network error backs off')
})

t.test('retry options out of range are refused', async (t) => {
  t.throws(() => fillRetryOptions({ deadlineMs: -1 }), /deadlineMs/)
  t.throws(() => fillRetryOptions({ deadlineMs: 300_001 }), /deadlineMs must be a number from 0 to 300000/, 'past the 300 s skew a retry could only be refused')
  t.same(fillRetryOptions({ deadlineMs: 300_000 }).deadlineMs, 300_000)
  t.throws(() => fillRetryOptions({ factor: 0.5 }), /factor/)
  t.throws(() => fillRetryOptions({ attemptTimeoutMs: 0 }), /attemptTimeoutMs/)
  t.throws(() => fillRetryOptions({ maxDelayMs: Number.NaN }), /maxDelayMs/)
  t.throws(() => fillRetryOptions({ baseDelayMs: '5' as unknown as number }), /baseDelayMs/)
  t.same(fillRetryOptions({ deadlineMs: 5 }), { ...DEFAULT_RETRY, deadlineMs: 5 })
})

t.test('a client or a push with retry options out of range is refused before anything is sent', async (t) => {
  const key = await loadCreatorKey(generateCreatorKeyPem())
  const base = { gatewayUrl: 'http://127.0.0.1:9', sourceId: 's', keyId: 'k', key }
  t.throws(() => new SourceClient({ ...base, retry: { deadlineMs: 400_000 } }), RangeError)
  await t.rejects(new SourceClient(base).push({ signal_id: 'sig_12345678' }, { factor: 0 }), RangeError)
})
