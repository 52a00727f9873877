/**
 * Behaviour every RateBuckets adapter (pipeline/ingest/ports.ts) must show. `open` gives
 * two views of one fresh backend, as two gateway processes see it (one adapter may give
 * the same object twice), flagging sustained over-rate after `flagAfterMinutes`.
 *
 * The clock is the caller's `now`, so the refill and the over-rate runs are checked at
 * exact times, whatever the machine's speed.
 */
import fc from 'fast-check'
import type { RateBuckets } from '../../pipeline/index.js'
import type { TapTest } from './kv-contract.js'

export type OpenRateBuckets = (t: TapTest, options: { readonly flagAfterMinutes: number }) => Promise<{ readonly a: RateBuckets; readonly b: RateBuckets }>

const MIN = 60_000
const sustainedOf = (d: { ok: boolean }) => (d as { sustained?: boolean }).sustained

export function rateBucketsContract(t: TapTest, name: string, open: OpenRateBuckets): void {
  t.test(`${name}: rate buckets contract`, async (t) => {
    t.test('a bucket of burst 3 at 1 per second admits 3 through either gateway, refuses the 4th with Retry-After 1, refills', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 1, per: 'second' as const, burst: 3 }
      t.same([(await a.take('s', rate, 0)).ok, (await b.take('s', rate, 0)).ok, (await a.take('s', rate, 0)).ok], [true, true, true])
      t.same(await b.take('s', rate, 0), { ok: false, retryAfterS: 1, sustained: false })
      t.equal((await a.take('s', rate, 1000)).ok, true, 'one token back a second later')
      t.equal((await b.take('s', rate, 1000)).ok, false, 'and only one')
    })

    t.test('the bucket refills at exactly max_rate, and its burst defaults to the rate', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 10, per: 'second' as const }
      const admitted = async (now: number) => {
        let n = 0
        while ((await (n % 2 === 0 ? a : b).take('s', rate, now)).ok) n++
        return n
      }
      t.equal(await admitted(0), 10, 'a full bucket holds max_rate when no burst is given')
      t.equal(await admitted(1000), 10, 'one second later, max_rate more: not twice that')
      t.equal(await admitted(1500), 5, 'half a second, half of it')
      t.equal(await admitted(61_500), 10, 'a long pause refills to the burst, no further')
    })

    t.test('a clock behind the last take makes no tokens: time never runs back', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 1, per: 'second' as const, burst: 1 }
      t.equal((await a.take('s', rate, 10_000)).ok, true)
      t.equal((await b.take('s', rate, 9_000)).ok, false, 'a gateway whose clock is a second behind')
      t.equal((await b.take('s', rate, 10_500)).ok, false, 'half a token')
      t.equal((await a.take('s', rate, 11_000)).ok, true)
    })

    t.test('Retry-After is the time until one token is back, per minute and per hour', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      await a.take('m', { rate: 2, per: 'minute' }, 0)
      await b.take('m', { rate: 2, per: 'minute' }, 0)
      const m = await a.take('m', { rate: 2, per: 'minute' }, 0)
      t.equal(!m.ok && m.retryAfterS, 30)
      await a.take('h', { rate: 1, per: 'hour' }, 0)
      const h = await b.take('h', { rate: 1, per: 'hour' }, 0)
      t.equal(!h.ok && h.retryAfterS, 3600)
    })

    t.test('refusals going on for N minutes, never a minute apart, on any gateway, are sustained over-rate; a quiet minute resets it', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 1, per: 'hour' as const }
      await a.take('s', rate, 0)
      let turn = 0
      const sustained = async (ms: number) => sustainedOf(await (turn++ % 2 === 0 ? a : b).take('s', rate, ms))
      const seconds = [MIN - 1000, MIN + 1000, 2 * MIN - 1000, 2 * MIN + 1000, 3 * MIN - 1000, 3 * MIN + 1000]
      const early: unknown[] = []
      for (const ms of seconds) early.push(await sustained(ms))
      t.same(early, Array(6).fill(false), 'two seconds either side of three minute boundaries: not sustained')
      // Now every 50 s: the run started at 59 s, so it is sustained from 3 min 59 s on.
      const times = Array.from({ length: 5 }, (_, i) => 3 * MIN + 50_000 * (i + 1))
      const later: unknown[] = []
      for (const ms of times) later.push(await sustained(ms))
      t.same(later, times.map((ms) => ms - (MIN - 1000) >= 3 * MIN))
      t.equal(await sustained(9 * MIN), false, 'after a quiet minute a new run starts')
      t.equal(await sustained(9 * MIN + 59_000), false)
    })

    t.test('a refund gives back one token, never past the burst; a source never seen has nothing to refund', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 1, per: 'hour' as const, burst: 2 }
      await a.refund('fresh', rate)
      t.equal((await b.take('fresh', rate, 0)).ok, true)
      t.equal((await b.take('fresh', rate, 0)).ok, true)
      t.equal((await a.take('fresh', rate, 0)).ok, false, 'the refund of a source never seen made no token')
      await a.refund('fresh', rate)
      t.equal((await b.take('fresh', rate, 0)).ok, true, 'the refunded token, through the other gateway')
      await b.refund('fresh', rate)
      await b.refund('fresh', rate)
      await b.refund('fresh', rate)
      t.same([(await a.take('fresh', rate, 0)).ok, (await a.take('fresh', rate, 0)).ok, (await a.take('fresh', rate, 0)).ok], [true, true, false], 'refunds stop at the burst')
    })

    t.test('takes made at once on two gateways admit exactly the burst, whatever their interleaving', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      let run = 0
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 1, max: 40 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 80 }), async (burst, sides) => {
          const source = `race_${run++}`
          const rate = { rate: 1, per: 'hour' as const, burst }
          const answers = await Promise.all(sides.map((onA) => (onA ? a : b).take(source, rate, 0)))
          return answers.filter((d) => d.ok).length === Math.min(burst, sides.length)
        }),
        { numRuns: 25 },
      )
    })

    t.test('sources have buckets of their own', async (t) => {
      const { a, b } = await open(t, { flagAfterMinutes: 3 })
      const rate = { rate: 1, per: 'hour' as const }
      t.equal((await a.take('one', rate, 0)).ok, true)
      t.equal((await b.take('two', rate, 0)).ok, true)
      t.equal((await b.take('one', rate, 0)).ok, false)
      t.equal((await a.take('two', rate, 0)).ok, false)
    })
  })
}
