/**
 * Behaviour every RevocationBarrier adapter (pipeline/ingest/ports.ts) must show, run
 * against the embedded adapter now and the NATS one later. Backend-agnostic: only the port.
 *
 * `open` gives two views of one fresh backend, as two gateway processes see it (one
 * adapter may give the same object twice).
 */
import type { RevocationBarrier } from '../../pipeline/index.js'
import type { TapTest } from './kv-contract.js'

export type OpenRevocationBarrier = (t: TapTest) => Promise<{ readonly a: RevocationBarrier; readonly b: RevocationBarrier }>

const KEY = { sourceId: 'src_1', keyId: 'key_1' }

/** A promise and the functions that settle it. */
function answer() {
  let resolve!: () => void
  let reject!: (err: Error) => void
  const promise = new Promise<void>((res, rej) => {
    resolve = res
    reject = rej
  })
  // The request's own caller handles the rejection; the barrier must not need to.
  promise.catch(() => undefined)
  return { promise, resolve, reject }
}

/** 'settled' if `p` settles within `ms`, else 'waiting'. */
const within = (p: Promise<unknown>, ms: number) => Promise.race([p.then(() => 'settled'), new Promise((r) => setTimeout(() => r('waiting'), ms))])

export function revocationBarrierContract(t: TapTest, name: string, open: OpenRevocationBarrier): void {
  t.test(`${name}: revocation barrier contract`, async (t) => {
    t.test('with no request held, settled resolves at once', async (t) => {
      const { a } = await open(t)
      t.equal(await within(a.settled(KEY), 1000), 'settled')
      t.equal(await within(a.settled(), 1000), 'settled', 'also without a scope')
    })

    t.test('settled waits for a request held on another gateway before the call, and resolves once it has its answer', async (t) => {
      const { a, b } = await open(t)
      const held = answer()
      a.hold(KEY, held.promise)
      const settled = b.settled(KEY)
      t.equal(await within(settled, 100), 'waiting')
      held.resolve()
      t.equal(await within(settled, 1000), 'settled')
    })

    t.test('a request whose answer is a refusal ends its hold too', async (t) => {
      const { a, b } = await open(t)
      const held = answer()
      a.hold(KEY, held.promise)
      const settled = b.settled(KEY)
      held.reject(new Error('refused'))
      t.equal(await within(settled, 1000), 'settled')
    })

    t.test('a retirement (the whole source) waits for the requests of each of its keys', async (t) => {
      const { a, b } = await open(t)
      const first = answer()
      const second = answer()
      a.hold({ sourceId: 'src_1', keyId: 'key_1' }, first.promise)
      b.hold({ sourceId: 'src_1', keyId: 'key_2' }, second.promise)
      const settled = a.settled({ sourceId: 'src_1' })
      first.resolve()
      t.equal(await within(settled, 100), 'waiting', 'one key still has a request held')
      second.resolve()
      t.equal(await within(settled, 1000), 'settled')
    })

    // Across gateways "after" is after the holding gateway learnt of the call, which takes
    // it a moment (its watch): a hold taken in the same turn as the call on another
    // gateway may be waited for, one taken 100 ms later must not be.
    t.test('requests that hold the barrier after settled was called are not waited for', async (t) => {
      const { a, b } = await open(t)
      const before = answer()
      a.hold(KEY, before.promise)
      const settled = b.settled(KEY)
      t.equal(await within(settled, 100), 'waiting')
      const after = answer()
      a.hold(KEY, after.promise)
      b.hold(KEY, after.promise)
      before.resolve()
      t.equal(await within(settled, 1000), 'settled', 'a steady stream of new requests cannot hold a revocation back')
      after.resolve()
    })
  })
}
