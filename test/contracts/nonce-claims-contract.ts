/**
 * Behaviour every NonceClaims adapter (pipeline/ingest/ports.ts) must show, run against
 * the embedded adapter now and the NATS one later. Backend-agnostic: only the port.
 *
 * Usage, in an adapter's test file:
 *   nonceClaimsContract(t, 'embedded', (t, { windowMs }) => ...)
 * `open` gives two views of one fresh backend, as two gateway processes see it (one
 * adapter may give the same object twice), holding nonces for `windowMs`.
 */
import fc from 'fast-check'
import type { NonceClaimRequest, NonceClaims } from '../../pipeline/index.js'
import type { TapTest } from './kv-contract.js'

export type OpenNonceClaims = (t: TapTest, options: { readonly windowMs: number }) => Promise<{ readonly a: NonceClaims; readonly b: NonceClaims }>

const WINDOW_MS = 300
const claimOf = (sourceId: string, keyId: string, nonce: string): NonceClaimRequest => ({ sourceId, keyId, nonce, now: Date.now(), sourceCap: 1000 })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export function nonceClaimsContract(t: TapTest, name: string, open: OpenNonceClaims): void {
  t.test(`${name}: nonce claims contract`, async (t) => {
    t.test('a nonce is claimed once: a second claim under the same key, through another gateway, is replayed', async (t) => {
      const { a, b } = await open(t, { windowMs: WINDOW_MS })
      t.equal(await a.claim(claimOf('src_1', 'key_1', 'n-1')), 'claimed')
      t.equal(await b.claim(claimOf('src_1', 'key_1', 'n-1')), 'replayed')
      t.equal(await a.claim(claimOf('src_1', 'key_1', 'n-1')), 'replayed')
    })

    t.test('a nonce is claimed per (source_id, key_id): the same nonce under another key or source is its own claim', async (t) => {
      const { a, b } = await open(t, { windowMs: WINDOW_MS })
      t.equal(await a.claim(claimOf('src_1', 'key_1', 'n-1')), 'claimed')
      t.equal(await b.claim(claimOf('src_1', 'key_2', 'n-1')), 'claimed')
      t.equal(await b.claim(claimOf('src_2', 'key_1', 'n-1')), 'claimed')
      // Ids are compared whole, not as a joined string that two pairs could share.
      t.equal(await a.claim(claimOf('src_1\nkey', '1', 'n-1')), 'claimed')
    })

    t.test('of many claims of one nonce made at once on two gateways, exactly one is claimed', async (t) => {
      const { a, b } = await open(t, { windowMs: WINDOW_MS })
      const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => (i % 2 === 0 ? a : b).claim(claimOf('src_1', 'key_1', 'n-race'))))
      t.equal(answers.filter((x) => x === 'claimed').length, 1)
      t.equal(answers.filter((x) => x === 'replayed').length, 23)
    })

    t.test('a nonce is held for the window, and may be claimed again once it has passed', async (t) => {
      const { a, b } = await open(t, { windowMs: WINDOW_MS })
      t.equal(await a.claim(claimOf('src_1', 'key_1', 'n-1')), 'claimed')
      await sleep(WINDOW_MS / 3)
      t.equal(await b.claim(claimOf('src_1', 'key_1', 'n-1')), 'replayed', 'still held within the window')
      await sleep(WINDOW_MS + 100)
      t.equal(await b.claim(claimOf('src_1', 'key_1', 'n-1')), 'claimed', 'free again after it')
    })

    t.test('any sequence of claims answers as a set would: the first of each (source, key, nonce) claimed, the rest replayed', async (t) => {
      const { a, b } = await open(t, { windowMs: 60_000 })
      let run = 0
      await fc.assert(
        fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('k1', 'k2'), fc.constantFrom('n1', 'n2', 'n3', 'n\n1'), fc.boolean()), { maxLength: 30 }), async (claims) => {
          const sourceId = `src_run_${run++}`
          const seen = new Set<string>()
          for (const [keyId, nonce, onA] of claims) {
            const expected = seen.has(`${keyId} ${nonce}`) ? 'replayed' : 'claimed'
            seen.add(`${keyId} ${nonce}`)
            if ((await (onA ? a : b).claim(claimOf(sourceId, keyId, nonce))) !== expected) return false
          }
          return true
        }),
        { numRuns: 50 },
      )
      t.pass('every sequence answered as a set')
    })
  })
}
