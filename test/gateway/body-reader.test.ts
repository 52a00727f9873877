import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { BodyReader, type BodyHandlers } from '../../gateway/http/body-reader.js'
import type { HttpResponse } from '../../gateway/http/uws.js'

/**
 * The reader's bookkeeping, driven chunk by chunk. The stand-in below plays the one
 * part of uWS's HttpResponse the reader touches (`onData`), so the order of chunks,
 * cancels and deadlines can be set exactly; the real uWS path (slow bodies, oversized
 * bodies, clients that leave) is covered end to end in ingest-framing.test.ts.
 */
function upload(): { res: HttpResponse; push: (bytes: string, isLast: boolean) => void } {
  let onData: ((chunk: ArrayBuffer, isLast: boolean) => void) | undefined
  const res = { onData: (cb: typeof onData) => void (onData = cb) } as unknown as HttpResponse
  const push = (bytes: string, isLast: boolean) => {
    const b = Buffer.from(bytes)
    onData?.(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength), isLast)
  }
  return { res, push }
}

type Outcome = { kind: 'body'; text: string } | { kind: 'timeout' } | { kind: 'too_large' }

function handlers(outcomes: Outcome[], name: string, seen: string[]): BodyHandlers {
  return {
    onBody: (body) => {
      outcomes.push({ kind: 'body', text: body.toString() })
      seen.push(name)
    },
    onTimeout: () => {
      outcomes.push({ kind: 'timeout' })
      seen.push(name)
    },
    onTooLarge: () => {
      outcomes.push({ kind: 'too_large' })
      seen.push(name)
    },
  }
}

t.test('a body in several chunks arrives whole, once, and leaves nothing pending', async (t) => {
  const reader = new BodyReader(10_000)
  t.teardown(() => reader.close())
  const outcomes: Outcome[] = []
  const { res, push } = upload()
  reader.read(res, 100, handlers(outcomes, 'a', []))
  t.equal(reader.pending, 1)
  push('{"a":', false)
  push('1}', true)
  push('late', true)
  t.same(outcomes, [{ kind: 'body', text: '{"a":1}' }])
  t.equal(reader.pending, 0)
})

t.test('past the limit: onTooLarge once, later chunks ignored, nothing pending', async (t) => {
  const reader = new BodyReader(10_000)
  t.teardown(() => reader.close())
  const outcomes: Outcome[] = []
  const { res, push } = upload()
  reader.read(res, 4, handlers(outcomes, 'a', []))
  push('abc', false)
  push('de', false)
  push('f', true)
  t.same(outcomes, [{ kind: 'too_large' }])
  t.equal(reader.pending, 0)
})

t.test('deadlines: only unfinished uploads time out, oldest first, cancelled ones never', async (t) => {
  const reader = new BodyReader(100)
  t.teardown(() => reader.close())
  const seen: string[] = []
  const outcomes: Outcome[] = []
  const uploads = ['first', 'done-middle', 'cancelled', 'last-of-first-wave'].map((name) => {
    const u = upload()
    const cancel = reader.read(u.res, 100, handlers(outcomes, name, seen))
    return { name, ...u, cancel }
  })
  // Finishing or cancelling one in the middle of the queue must unlink only that one.
  uploads[1]!.push('{}', true)
  uploads[2]!.cancel()
  uploads[2]!.cancel()
  t.equal(reader.pending, 2)
  await sleep(20)
  const later = upload()
  reader.read(later.res, 100, handlers(outcomes, 'second-wave', seen))
  t.equal(reader.pending, 3)

  // Sweeps run every 100 ms: both waves have expired by the second one.
  await sleep(330)
  t.same(seen, ['done-middle', 'first', 'last-of-first-wave', 'second-wave'])
  t.equal(outcomes.filter((o) => o.kind === 'timeout').length, 3)
  t.equal(reader.pending, 0)
  // A chunk after the deadline is dropped: the request was already answered.
  uploads[0]!.push('{}', true)
  t.equal(seen.length, 4)
})

t.test('an upload still in time is not swept with the expired ones', async (t) => {
  // Sweeps every 300 ms: "early" (deadline ~300) is gone by the tick at 600 at the
  // latest, "fresh" (deadline ~750) waits for the tick at 900.
  const reader = new BodyReader(300)
  t.teardown(() => reader.close())
  const seen: string[] = []
  const outcomes: Outcome[] = []
  const early = upload()
  reader.read(early.res, 100, handlers(outcomes, 'early', seen))
  await sleep(450)
  const fresh = upload()
  reader.read(fresh.res, 100, handlers(outcomes, 'fresh', seen))
  await sleep(250)
  t.same(seen, ['early'], 'the early upload timed out, the fresh one is still waiting')
  t.equal(reader.pending, 1)
  fresh.push('{}', true)
  t.same(seen, ['early', 'fresh'])
  t.equal(reader.pending, 0)
})

t.test('after the newest upload ends, the next one still joins the queue and times out', async (t) => {
  const reader = new BodyReader(50)
  t.teardown(() => reader.close())
  const seen: string[] = []
  const outcomes: Outcome[] = []
  const older = upload()
  reader.read(older.res, 100, handlers(outcomes, 'older', seen))
  const newest = upload()
  reader.read(newest.res, 100, handlers(outcomes, 'newest', seen))
  newest.push('{}', true)
  const next = upload()
  reader.read(next.res, 100, handlers(outcomes, 'next', seen))
  await sleep(250)
  t.same(seen, ['newest', 'older', 'next'])
  t.equal(reader.pending, 0)
})
