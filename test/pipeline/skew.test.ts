import t from 'tap'
import { isWithinSkew, MAX_SKEW_MS, NONCE_WINDOW_MS } from '../../schemas/index.js'

t.test('the skew allowance is 300 seconds either way, inclusive, to the millisecond', async (t) => {
  t.equal(MAX_SKEW_MS, 300_000)
  const now = Date.UTC(2026, 0, 1)
  t.equal(isWithinSkew(now, now - 300_000), true)
  t.equal(isWithinSkew(now, now + 300_000), true)
  t.equal(isWithinSkew(now, now - 300_001), false)
  t.equal(isWithinSkew(now, now + 300_001), false)
})

// What the service gives its stores is read back from the saved state in test/gateway/durability.test.ts.
t.test('the nonce window is 10 minutes', async (t) => {
  t.equal(NONCE_WINDOW_MS, 600_000)
})
