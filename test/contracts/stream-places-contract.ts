/**
 * Behaviour every `StreamPlaces` adapter must show (delivery/stream-places.ts): the memory
 * adapter and the key-value one, on a file bucket and on NATS KV, pass the same tests.
 *
 * `open(t, max, now)` gives a fresh count of places for at most `max` streams per rental,
 * on which `view()` opens one more view (a process, or for the memory adapter a handler of
 * the one process); every view reads the time from `now`. `expireMs` is how long the
 * places of a view stopped without giving them back (killed) stay taken: 0 in memory,
 * where they go with the process.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import fc from 'fast-check'
import type tap from 'tap'
import { StreamLimitError, type StreamPlace, type StreamPlaces } from '../../delivery/index.js'

export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]

export interface PlacesFixture {
  view(): StreamPlaces
  readonly expireMs: number
}
export type OpenStreamPlaces = (t: TapTest, max: number, now: () => number) => Promise<PlacesFixture>

const never = () => undefined
let rentals = 0
const rentalId = () => `rnt_places_${++rentals}_${Date.now().toString(36)}`

/** What a take ended with: the place, or the class of its refusal. */
const settle = (p: Promise<StreamPlace>) => p.then((place) => place, (err: unknown) => (err instanceof StreamLimitError ? 'limited' : `failed: ${String(err)}`))

export function streamPlacesContract(t: TapTest, name: string, open: OpenStreamPlaces): void {
  const fresh = async (t: TapTest, max: number) => {
    const clock = { at: Date.now() }
    const fixture = await open(t, max, () => clock.at)
    const views: StreamPlaces[] = []
    t.teardown(async () => {
      for (const v of views) await v.close()
    })
    const view = () => {
      const v = fixture.view()
      views.push(v)
      return v
    }
    return { clock, view, expireMs: fixture.expireMs }
  }

  t.test(`${name}: stream places contract`, async (t) => {
    t.test('a rental has at most max places over every view: the next take is refused with StreamLimitError; other rentals are apart', async (t) => {
      const { view } = await fresh(t, 2)
      const [a, b] = [view(), view()]
      const rental = rentalId()
      await a.take(rental, never)
      await b.take(rental, never)
      await t.rejects(a.take(rental, never), StreamLimitError, 'a third on the view that holds one')
      await t.rejects(b.take(rental, never), StreamLimitError, 'a third on the other view')
      const other = rentalId()
      await a.take(other, never)
      await a.take(other, never)
      t.equal(a.held, 3, 'a view counts the places it holds')
      t.equal(b.held, 1)
    })

    t.test('a released place is free at once for every view; a second release gives back nothing more', async (t) => {
      const { view } = await fresh(t, 2)
      const [a, b] = [view(), view()]
      const rental = rentalId()
      const first = await a.take(rental, never)
      await a.take(rental, never)
      await t.rejects(b.take(rental, never), StreamLimitError, 'full')
      first.release()
      t.equal(first.held, false)
      const deadline = Date.now() + 5000
      let taken: StreamPlace | string = 'limited'
      // A release is written after it returns: the other view may see it a write later.
      while (taken === 'limited' && Date.now() < deadline) {
        await sleep(5)
        taken = await settle(b.take(rental, never))
      }
      t.type(taken, 'object', `the other view took the place given back (${String(taken)})`)
      first.release()
      await t.rejects(b.take(rental, never), StreamLimitError, 'released twice, freed once')
      t.same([a.held, b.held], [1, 1])
    })

    t.test('views racing for places never pass the cap together, and no take is refused while a place is free (property)', async (t) => {
      const { view } = await fresh(t, 4)
      const [a, b] = [view(), view()]
      await fc.assert(
        fc.asyncProperty(fc.integer({ min: 0, max: 3 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 10 }), async (held, onA) => {
          const rental = rentalId()
          const before: StreamPlace[] = []
          for (let i = 0; i < held; i++) before.push(await (i % 2 === 0 ? a : b).take(rental, never))
          const results = await Promise.all(onA.map((x) => settle((x ? a : b).take(rental, never))))
          const ok = results.filter((r) => typeof r === 'object') as StreamPlace[]
          const refused = results.filter((r) => r === 'limited').length
          for (const p of [...before, ...ok]) p.release()
          return ok.length === Math.min(onA.length, 4 - held) && ok.length + refused === onA.length
        }),
        { numRuns: 25 },
      )
      t.pass('exactly the free places were taken, every other take refused by the cap')
    })

    t.test("a view stopped without giving its places back (a killed process) holds them until they expire, then every place is free", async (t) => {
      const { view, clock, expireMs } = await fresh(t, 2)
      const [a, b] = [view(), view()]
      const rental = rentalId()
      const takenAt = clock.at
      await a.take(rental, never)
      await a.take(rental, never)
      a.destroy()
      if (expireMs > 0) {
        clock.at = takenAt + expireMs - 1
        await t.rejects(b.take(rental, never), StreamLimitError, 'still held just before they expire')
      }
      clock.at = takenAt + expireMs
      await b.take(rental, never)
      await b.take(rental, never)
      t.equal(b.held, 2, 'both places came back')
      await t.rejects(b.take(rental, never), StreamLimitError, 'and the cap still holds')
    })

    t.test('a closed view gives its places back at once and takes no more', async (t) => {
      const { view } = await fresh(t, 1)
      const [a, b] = [view(), view()]
      const rental = rentalId()
      const place = await a.take(rental, never)
      await a.close()
      await a.close()
      t.equal(place.held, false, 'its place is no longer held')
      await b.take(rental, never)
      t.pass('the other view took the place at once')
      await t.rejects(a.take(rentalId(), never), { code: 'stream_places_unavailable' })
    })
  })
}
