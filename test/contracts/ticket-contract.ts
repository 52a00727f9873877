/**
 * Behaviour every `TicketStore` adapter must show (delivery/ticket-store.ts): the memory
 * adapter and the key-value one pass the same tests. Adapter-agnostic: only the port and
 * TicketStoreFullError.
 *
 * `open(maxTickets, bounds)` opens a fresh, empty store holding at most `maxTickets`
 * tickets, and per rental and per renter at most `bounds`; it is closed by the suite.
 */
import { createHash, randomBytes } from 'node:crypto'
import type tap from 'tap'
import { TicketLimitError, TicketStoreFullError, type TicketBounds, type TicketGrant, type TicketStore } from '../../delivery/index.js'

export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]
export type OpenTicketStore = (t: TapTest, maxTickets: number, bounds: TicketBounds) => Promise<TicketStore>

/** A ticket's stored form: the SHA-256 of 32 random bytes, as the stream routes hash them. */
export const newHash = () => createHash('sha256').update(randomBytes(32)).digest('hex')
const grant = (n: number) => ({ rental_id: `rnt_${n}`, renter_id: `renter:${n}`, token_id: `tok_${n}` })
const of = (rental_id: string, renter_id: string): TicketGrant => ({ rental_id, renter_id, token_id: 'tok_b' })

export function ticketContract(t: TapTest, name: string, open: OpenTicketStore): void {
  const fresh = async (t: TapTest, max = 100, bounds: TicketBounds = { maxPerRental: 100, maxPerRenter: 100 }) => {
    const store = await open(t, max, bounds)
    t.teardown(() => store.close())
    return store
  }

  t.test(`${name}: ticket store contract`, async (t) => {
    t.test('a ticket is taken once, with its grant; a second take gets nothing', async (t) => {
      const store = await fresh(t)
      const hash = newHash()
      const now = Date.now()
      await store.put(hash, grant(1), now + 60_000, now)
      t.same(await store.take(hash, now), grant(1))
      t.equal(await store.take(hash, now), undefined, 'single use')
    })

    t.test('peek shows a ticket without spending it; an expired one shows nothing', async (t) => {
      const store = await fresh(t)
      const hash = newHash()
      const now = Date.now()
      await store.put(hash, grant(3), now + 1000, now)
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
      await store.put(hash, grant(2), now + 1000, now)
      t.equal(await store.take(hash, now + 1000), undefined, 'expired at expiresAt')
      t.equal(await store.take(hash, now), undefined, 'and gone: an expired take used it up')
    })

    t.test('tickets are apart: taking one leaves the others', async (t) => {
      const store = await fresh(t)
      const now = Date.now()
      const hashes = [newHash(), newHash(), newHash()]
      for (const [i, h] of hashes.entries()) await store.put(h, grant(i), now + 60_000, now)
      t.same(await store.take(hashes[1]!, now), grant(1))
      t.same(await store.take(hashes[0]!, now), grant(0))
      t.same(await store.take(hashes[2]!, now), grant(2))
    })

    t.test('of many takes of one ticket at once, exactly one gets the grant', async (t) => {
      const store = await fresh(t)
      const now = Date.now()
      const hash = newHash()
      await store.put(hash, grant(3), now + 60_000, now)
      const results = await Promise.all(Array.from({ length: 8 }, () => store.take(hash, now)))
      t.equal(results.filter((r) => r !== undefined).length, 1)
    })

    t.test('bounded: past maxTickets outstanding a new ticket is refused with TicketStoreFullError; a taken one frees its place', async (t) => {
      const store = await fresh(t, 3)
      const now = Date.now()
      const hashes = [newHash(), newHash(), newHash()]
      for (const h of hashes) await store.put(h, grant(4), now + 60_000, now)
      await t.rejects(store.put(newHash(), grant(4), now + 60_000, now), TicketStoreFullError)
      await store.take(hashes[0]!, now)
      const next = newHash()
      await store.put(next, grant(5), now + 60_000, now)
      t.same(await store.take(next, now), grant(5))
    })

    t.test('a full store makes room by dropping expired tickets, never live ones', async (t) => {
      const store = await fresh(t, 3)
      const now = Date.now()
      const live = newHash()
      await store.put(live, grant(6), now + 60_000, now)
      await store.put(newHash(), grant(7), now - 1, now)
      await store.put(newHash(), grant(8), now - 1, now)
      const a = newHash()
      const b = newHash()
      await store.put(a, grant(9), now + 60_000, now)
      await store.put(b, grant(10), now + 60_000, now)
      await t.rejects(store.put(newHash(), grant(11), now + 60_000, now), TicketStoreFullError, 'the live ones are kept')
      t.same(await store.take(live, now), grant(6))
      t.same(await store.take(a, now), grant(9))
      t.same(await store.take(b, now), grant(10))
    })

    t.test('a rental holds at most maxPerRental outstanding tickets: the next is refused with TicketLimitError, Retry-After until its oldest expires', async (t) => {
      const store = await fresh(t, 100, { maxPerRental: 3, maxPerRenter: 100 })
      const now = Date.now()
      for (let i = 0; i < 3; i++) await store.put(newHash(), of('rnt_a', 'renter:a'), now + 10_000 + i * 1000, now)
      const refused = await store.put(newHash(), of('rnt_a', 'renter:a'), now + 60_000, now).then(() => undefined, (err: unknown) => err)
      t.ok(refused instanceof TicketLimitError, 'refused')
      t.equal((refused as TicketLimitError).scope, 'rental')
      t.equal((refused as TicketLimitError).retryAfterMs, 10_000, 'the wait is until the oldest of the rental\'s tickets expires')
      await store.put(newHash(), of('rnt_b', 'renter:a'), now + 60_000, now)
      await store.put(newHash(), of('rnt_c', 'renter:c'), now + 60_000, now)
      t.pass('another rental of the renter, and another renter, still get tickets')
    })

    t.test('a renter holds at most maxPerRenter outstanding tickets over all its rentals', async (t) => {
      const store = await fresh(t, 100, { maxPerRental: 2, maxPerRenter: 5 })
      const now = Date.now()
      for (let i = 0; i < 5; i++) await store.put(newHash(), of(`rnt_${i}`, 'renter:many'), now + 60_000, now)
      const refused = await store.put(newHash(), of('rnt_9', 'renter:many'), now + 60_000, now).then(() => undefined, (err: unknown) => err)
      t.ok(refused instanceof TicketLimitError, 'a sixth, on a rental that holds none')
      t.equal((refused as TicketLimitError).scope, 'renter')
      t.equal((refused as TicketLimitError).retryAfterMs, 60_000)
      await store.put(newHash(), of('rnt_9', 'renter:other'), now + 60_000, now)
      t.pass('another renter is not limited by it')
    })

    t.test('a spent ticket gives its places back at once; an expired one when it expires, spent or not', async (t) => {
      const store = await fresh(t, 100, { maxPerRental: 2, maxPerRenter: 2 })
      const now = Date.now()
      const first = newHash()
      await store.put(first, of('rnt_s', 'renter:s'), now + 1000, now)
      await store.put(newHash(), of('rnt_s', 'renter:s'), now + 60_000, now)
      await t.rejects(store.put(newHash(), of('rnt_s', 'renter:s'), now + 60_000, now), TicketLimitError, 'full')
      t.ok(await store.take(first, now), 'spent')
      await store.put(newHash(), of('rnt_s', 'renter:s'), now + 2000, now)
      t.pass('its place is free')
      await t.rejects(store.put(newHash(), of('rnt_s', 'renter:s'), now + 60_000, now + 1999), TicketLimitError, 'full again')
      await store.put(newHash(), of('rnt_s', 'renter:s'), now + 60_000, now + 2000)
      t.pass('the one never spent frees its place when it expires')
    })

    t.test('a refused ticket takes no place: neither its rental\'s when its renter is full, nor either when the store is full', async (t) => {
      const store = await fresh(t, 100, { maxPerRental: 2, maxPerRenter: 3 })
      const now = Date.now()
      const a = [newHash(), newHash()]
      for (const h of a) await store.put(h, of('rnt_x', 'renter:x'), now + 60_000, now)
      await store.put(newHash(), of('rnt_y', 'renter:x'), now + 60_000, now)
      const refused = await store.put(newHash(), of('rnt_y', 'renter:x'), now + 60_000, now).then(() => undefined, (err: unknown) => err)
      t.equal((refused as TicketLimitError).scope, 'renter', 'the renter is full')
      await store.take(a[0]!, now)
      await store.put(newHash(), of('rnt_y', 'renter:x'), now + 60_000, now)
      t.pass('rnt_y still has its second place: the refusal gave it back')

      const small = await fresh(t, 2, { maxPerRental: 3, maxPerRenter: 3 })
      const b = [newHash(), newHash()]
      for (const h of b) await small.put(h, of('rnt_f', 'renter:f'), now + 60_000, now)
      await t.rejects(small.put(newHash(), of('rnt_f', 'renter:f'), now + 60_000, now), TicketStoreFullError)
      await small.take(b[0]!, now)
      await small.put(newHash(), of('rnt_f', 'renter:f'), now + 60_000, now)
      await small.take(b[1]!, now)
      await small.put(newHash(), of('rnt_f', 'renter:f'), now + 60_000, now)
      t.pass('the rental still has its three places: the full store gave them back')
    })

    t.test('of many issues at once racing for the last places, exactly the bound get one', async (t) => {
      const store = await fresh(t, 100, { maxPerRental: 5, maxPerRenter: 8 })
      const now = Date.now()
      await store.put(newHash(), of('rnt_r', 'renter:r'), now + 60_000, now)
      const settle = (g: TicketGrant) => store.put(newHash(), g, now + 60_000, now).then(() => 'ok', (err: unknown) => (err instanceof TicketLimitError ? err.scope : String(err)))
      const rental = await Promise.all(Array.from({ length: 12 }, () => settle(of('rnt_r', 'renter:r'))))
      t.equal(rental.filter((r) => r === 'ok').length, 4, 'four places were left on the rental')
      t.equal(rental.filter((r) => r === 'rental').length, 8, 'the others are refused by the rental\'s bound')
      const renter = await Promise.all(Array.from({ length: 12 }, (_, i) => settle(of(`rnt_o${i}`, 'renter:r'))))
      t.equal(renter.filter((r) => r === 'ok').length, 3, 'three places were left on the renter, over other rentals')
      t.equal(renter.filter((r) => r === 'renter').length, 9, 'the others are refused by the renter\'s bound')
    })
  })
}
