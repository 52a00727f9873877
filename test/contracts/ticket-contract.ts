/**
 * Behaviour every `TicketStore` adapter must show (delivery/ticket-store.ts): the memory
 * adapter and the key-value one pass the same tests. Adapter-agnostic: only the port and
 * TicketStoreFullError.
 *
 * `open(maxTickets)` opens a fresh, empty store holding at most `maxTickets` tickets; it
 * is closed by the suite.
 */
import { createHash, randomBytes } from 'node:crypto'
import type tap from 'tap'
import { TicketStoreFullError, type TicketStore } from '../../delivery/index.js'

export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]
export type OpenTicketStore = (t: TapTest, maxTickets: number) => Promise<TicketStore>

/** A ticket's stored form: the SHA-256 of 32 random bytes, as the stream routes hash them. */
export const newHash = () => createHash('sha256').update(randomBytes(32)).digest('hex')
const grant = (n: number) => ({ rental_id: `rnt_${n}`, renter_id: `renter:${n}`, token_id: `tok_${n}` })

export function ticketContract(t: TapTest, name: string, open: OpenTicketStore): void {
  const fresh = async (t: TapTest, max = 100) => {
    const store = await open(t, max)
    t.teardown(() => store.close())
    return store
  }

  t.test(`${name}: ticket store contract`, async (t) => {
    t.test('a ticket is taken once, with its grant; a second take gets nothing', async (t) => {
      const store = await fresh(t)
      const hash = newHash()
      const now = Date.now()
      await store.put(hash, grant(1), now + 60_000)
      t.same(await store.take(hash, now), grant(1))
      t.equal(await store.take(hash, now), undefined, 'single use')
    })

    t.test('peek shows a ticket without spending it; an expired one shows nothing', async (t) => {
      const store = await fresh(t)
      const hash = newHash()
      const now = Date.now()
      await store.put(hash, grant(3), now + 1000)
      t.same(await store.peek(hash, now), grant(3))
      t.same(await store.peek(hash, now), grant(3), 'peeking again still shows it')
      t.equal(await store.peek(hash, now + 1000), undefined, 'expired at expiresAt')
      t.equal(await store.peek(newHash(), now), undefined, 'unknown')
      t.same(await store.take(hash, now), grant(3), 'and it is taken once after')
      t.equal(await store.peek(hash, now), undefined, 'a taken ticket shows nothing')
    })

    t.test('an unknown ticket, and one taken after its expiry, get nothing', async (t) => {
      const store = await fresh(t)
      const now = Date.now()
      t.equal(await store.take(newHash(), now), undefined)
      const hash = newHash()
      await store.put(hash, grant(2), now + 1000)
      t.equal(await store.take(hash, now + 1000), undefined, 'expired at expiresAt')
      t.equal(await store.take(hash, now), undefined, 'and gone: an expired take used it up')
    })

    t.test('tickets are apart: taking one leaves the others', async (t) => {
      const store = await fresh(t)
      const now = Date.now()
      const hashes = [newHash(), newHash(), newHash()]
      for (const [i, h] of hashes.entries()) await store.put(h, grant(i), now + 60_000)
      t.same(await store.take(hashes[1]!, now), grant(1))
      t.same(await store.take(hashes[0]!, now), grant(0))
      t.same(await store.take(hashes[2]!, now), grant(2))
    })

    t.test('of many takes of one ticket at once, exactly one gets the grant', async (t) => {
      const store = await fresh(t)
      const now = Date.now()
      const hash = newHash()
      await store.put(hash, grant(3), now + 60_000)
      const results = await Promise.all(Array.from({ length: 8 }, () => store.take(hash, now)))
      t.equal(results.filter((r) => r !== undefined).length, 1)
    })

    t.test('bounded: past maxTickets outstanding a new ticket is refused with TicketStoreFullError; a taken one frees its place', async (t) => {
      const store = await fresh(t, 3)
      const now = Date.now()
      const hashes = [newHash(), newHash(), newHash()]
      for (const h of hashes) await store.put(h, grant(4), now + 60_000)
      await t.rejects(store.put(newHash(), grant(4), now + 60_000), TicketStoreFullError)
      await store.take(hashes[0]!, now)
      const next = newHash()
      await store.put(next, grant(5), now + 60_000)
      t.same(await store.take(next, now), grant(5))
    })

    t.test('a full store makes room by dropping expired tickets, never live ones', async (t) => {
      const store = await fresh(t, 3)
      const now = Date.now()
      const live = newHash()
      await store.put(live, grant(6), now + 60_000)
      await store.put(newHash(), grant(7), now - 1)
      await store.put(newHash(), grant(8), now - 1)
      const a = newHash()
      const b = newHash()
      await store.put(a, grant(9), now + 60_000)
      await store.put(b, grant(10), now + 60_000)
      await t.rejects(store.put(newHash(), grant(11), now + 60_000), TicketStoreFullError, 'the live ones are kept')
      t.same(await store.take(live, now), grant(6))
      t.same(await store.take(a, now), grant(9))
      t.same(await store.take(b, now), grant(10))
    })
  })
}
