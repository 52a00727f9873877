import { setTimeout as sleep } from 'node:timers/promises'
import t, { type Test } from 'tap'
import { BodyReader } from '../../gateway/http/body-reader.js'
import type { HttpResponse } from '../../gateway/http/uws.js'

/**
 * The reader's bookkeeping, driven chunk by chunk. The stand-in below plays the one
 * part of uWS's HttpResponse the reader touches (`onData`), so the order of chunks,
 * cancels and deadlines can be set exactly; the real uWS path (slow bodies, oversized
 * bodies, clients that leave) is covered end to end in ingest-framing.test.ts.
 */

type Outcome = 'body' | 'timeout' | 'too_large' | 'busy'

interface Started {
  /** Delivers one chunk as uWS would. */
  push(bytes: string, isLast: boolean): void
  cancel(): void
}

/** A reader with a `timeoutMs` deadline, and a log of which upload ended how, in order. */
function fixture(t: Test, timeoutMs: number, maxSlow = 1000) {
  const reader = new BodyReader(timeoutMs, maxSlow)
  t.teardown(() => reader.close())
  const ended: Array<{ name: string; outcome: Outcome; text?: string }> = []
  /** Each upload its own owner unless told; `null`: no owner, so it may not be slow. */
  const start = (name: string, limit = 100, owner: string | null = name): Started => {
    let onData: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined
    const res = { onData: (cb: typeof onData) => void (onData = cb) } as unknown as HttpResponse
    const cancel = reader.read(res, limit, {
      onBody: (body) => void ended.push({ name, outcome: 'body', text: body.toString() }),
      onTimeout: () => void ended.push({ name, outcome: 'timeout' }),
      onTooLarge: () => void ended.push({ name, outcome: 'too_large' }),
      onBusy: () => void ended.push({ name, outcome: 'busy' }),
    }, owner ?? undefined)
    const push = (bytes: string, isLast: boolean) => {
      const b = Buffer.from(bytes)
      onData?.(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength), isLast)
    }
    return { push, cancel }
  }
  const names = () => ended.map((e) => e.name)
  return { reader, ended, start, names }
}

t.test('a body in several chunks arrives whole, once, and leaves nothing pending', async (t) => {
  const { reader, ended, start } = fixture(t, 10_000)
  const a = start('a')
  t.equal(reader.pending, 1)
  a.push('{"a":', false)
  a.push('1}', true)
  a.push('late', true)
  t.same(ended, [{ name: 'a', outcome: 'body', text: '{"a":1}' }])
  t.equal(reader.pending, 0)
})

t.test('past the limit: onTooLarge once, later chunks ignored, nothing pending', async (t) => {
  const { reader, ended, start } = fixture(t, 10_000)
  const a = start('a', 4)
  a.push('abc', false)
  a.push('de', false)
  a.push('f', true)
  t.same(ended, [{ name: 'a', outcome: 'too_large' }])
  t.equal(reader.pending, 0)
})

t.test('deadlines: only unfinished uploads time out, oldest first, cancelled ones never', async (t) => {
  const { reader, ended, start, names } = fixture(t, 100)
  const [first, doneMiddle, cancelled] = ['first', 'done-middle', 'cancelled', 'last-of-first-wave'].map((name) => start(name))
  // Finishing or cancelling one in the middle of the queue must unlink only that one.
  doneMiddle!.push('{}', true)
  cancelled!.cancel()
  cancelled!.cancel()
  t.equal(reader.pending, 2)
  await sleep(20)
  start('second-wave')
  t.equal(reader.pending, 3)

  // Sweeps run every 100 ms: both waves have expired by the second one.
  await sleep(330)
  t.same(names(), ['done-middle', 'first', 'last-of-first-wave', 'second-wave'])
  t.equal(ended.filter((e) => e.outcome === 'timeout').length, 3)
  t.equal(reader.pending, 0)
  // A chunk after the deadline is dropped: the request was already answered.
  first!.push('{}', true)
  t.equal(ended.length, 4)
})

t.test('an upload still in time is not swept with the expired ones', async (t) => {
  // Sweeps every 300 ms: "early" (deadline ~300) is gone by the tick at 600 at the
  // latest, "fresh" (deadline ~750) waits for the tick at 900.
  const { reader, start, names } = fixture(t, 300)
  start('early')
  await sleep(450)
  const fresh = start('fresh')
  await sleep(250)
  t.same(names(), ['early'], 'the early upload timed out, the fresh one is still waiting')
  t.equal(reader.pending, 1)
  fresh.push('{}', true)
  t.same(names(), ['early', 'fresh'])
  t.equal(reader.pending, 0)
})

t.test('after the newest upload ends, the next one still joins the queue and times out', async (t) => {
  const { reader, start, names } = fixture(t, 50)
  start('older')
  start('newest').push('{}', true)
  start('next')
  await sleep(250)
  t.same(names(), ['newest', 'older', 'next'])
  t.equal(reader.pending, 0)
})

/** One event-loop turn: the reader decides which uploads are slow in its check phase. */
const turn = () => new Promise((r) => setImmediate(r))

t.test('a body that comes with its head is never slow; one still incomplete a turn later is, until it ends', async (t) => {
  const { reader, ended, start } = fixture(t, 10_000)
  const quick = start('quick')
  const slow = start('slow')
  quick.push('{}', true)
  slow.push('{"a"', false)
  await turn()
  t.equal(reader.slow, 1, 'only the incomplete one')
  slow.push(':1}', true)
  t.equal(reader.slow, 0)
  t.same(ended.map((e) => `${e.name} ${e.outcome}`), ['quick body', 'slow body'])
})

t.test('past maxSlow a new slow upload ends with onBusy at once; quick ones are unaffected; a cancel frees a place', async (t) => {
  const { reader, ended, start, names } = fixture(t, 10_000, 2)
  const a = start('a')
  start('b')
  await turn()
  t.equal(reader.slow, 2)
  const c = start('c')
  const quick = start('quick')
  quick.push('{}', true)
  await turn()
  t.same(ended.map((e) => `${e.name} ${e.outcome}`), ['quick body', 'c busy'])
  c.push('{}', true)
  t.equal(ended.length, 2, 'a busy upload takes no later chunk')
  t.equal(reader.pending, 2)
  a.cancel()
  t.equal(reader.slow, 1, 'a cancelled slow upload gives its place back')
  start('d')
  await turn()
  t.equal(reader.slow, 2, 'and the next slow one gets it')
  t.same(names(), ['quick', 'c'])
})

t.test('a slow upload that times out gives its place back', async (t) => {
  const { reader, ended, start } = fixture(t, 100, 1)
  start('a')
  await turn()
  t.equal(reader.slow, 1)
  await sleep(400)
  t.same(ended, [{ name: 'a', outcome: 'timeout' }])
  t.equal(reader.slow, 0)
  t.equal(reader.pending, 0)
})

t.test('one owner holds at most its share of the slow places; other owners keep theirs; uploads without owner have a share of their own', async (t) => {
  // 16 places: an eighth is 2 per owner, and 2 more for uploads without one.
  const { reader, ended, start } = fixture(t, 10_000, 16)
  const x1 = start('x1', 100, 'creator-x')
  start('x2', 100, 'creator-x')
  start('x3', 100, 'creator-x')
  start('y1', 100, 'creator-y')
  const anonymous = start('anonymous1', 100, null)
  start('anonymous2', 100, null)
  start('anonymous3', 100, null)
  const quick = start('quick', 100, null)
  quick.push('{}', true)
  await turn()
  t.same(ended.map((e) => `${e.name} ${e.outcome}`), ['quick body', 'x3 busy', 'anonymous3 busy'])
  t.equal(reader.slow, 3, 'two of x and one of y')
  t.equal(reader.slowUnowned, 2, 'two without an owner, beside them')
  x1.cancel()
  start('x4', 100, 'creator-x')
  await turn()
  t.equal(reader.slow, 3, 'the owner got its place back')
  anonymous.push('{}', true)
  start('anonymous4', 100, null)
  await turn()
  t.equal(reader.slowUnowned, 2, 'a finished unowned upload gives its place back')
  t.same(ended.map((e) => `${e.name} ${e.outcome}`), ['quick body', 'x3 busy', 'anonymous3 busy', 'anonymous1 body'])
})

t.test('uploads without an owner never take an owner place', async (t) => {
  // 8 places: one per owner, and one for uploads without one.
  const { reader, ended, start } = fixture(t, 10_000, 8)
  start('anonymous1', 100, null)
  start('anonymous2', 100, null)
  for (let i = 0; i < 8; i++) start(`c${i}`, 100, `creator-${i}`)
  await turn()
  t.same(ended.map((e) => `${e.name} ${e.outcome}`), ['anonymous2 busy'])
  t.equal(reader.slow, 8, 'every owner place still went to an owner')
})
