/**
 * Behaviour every `KvBucket` adapter must show, so the NATS KV adapter can later pass
 * the same tests as the file adapter. Adapter-agnostic: it uses only the port
 * (storage/kv-store.ts) and error codes, never an adapter's files.
 *
 * Usage, in an adapter's test file:
 *   kvContract(t, 'file', (dir, name, limits) => fileKvBuckets({ dir })(name, limits))
 * `open(dir, name, limits)` must open the bucket; called again with the same `dir` and
 * `name` after the first was closed it must reopen the same bucket (for NATS, `dir` can
 * key the bucket name).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import fc from 'fast-check'
import type tap from 'tap'
import { isKvError, type KvBucket, type KvBucketLimits, type KvWatchEntry } from '../../storage/index.js'

export type TapTest = Parameters<Parameters<typeof tap.test>[0]>[0]
export type OpenBucket = (dir: string, name: string, limits: KvBucketLimits) => Promise<KvBucket>

const LIMITS: KvBucketLimits = { maxKeys: 1000, maxValueBytes: 4096 }
const bytes = (s: string): Uint8Array => new TextEncoder().encode(s)
const text = (b: Uint8Array): string => new TextDecoder().decode(b)

/** A fresh bucket in a fresh folder; closed and removed at teardown. */
async function fresh(t: TapTest, open: OpenBucket, limits = LIMITS) {
  const dir = await mkdtemp(join(tmpdir(), 'kv-contract-'))
  const opened: KvBucket[] = []
  t.teardown(async () => {
    for (const b of opened) await b.close()
    await rm(dir, { recursive: true, force: true })
  })
  const reopen = async (): Promise<KvBucket> => {
    const b = await open(dir, 'contract', limits)
    opened.push(b)
    return b
  }
  return { bucket: await reopen(), reopen }
}

/** The next `n` entries of a watch. */
async function take(iterator: AsyncIterator<KvWatchEntry>, n: number): Promise<KvWatchEntry[]> {
  const out: KvWatchEntry[] = []
  while (out.length < n) {
    const r = await iterator.next()
    if (r.done) break
    out.push(r.value)
  }
  return out
}

export function kvContract(t: TapTest, name: string, open: OpenBucket): void {
  t.test(`${name}: kv bucket contract`, async (t) => {
    t.test('a create gives revision 1 in a new bucket, and get returns the value with it', async (t) => {
      const { bucket } = await fresh(t, open)
      t.equal(await bucket.create('a', bytes('one')), 1)
      const entry = await bucket.get('a')
      t.match(entry, { bucket: bucket.name, key: 'a', revision: 1, operation: 'PUT' })
      t.equal(text(entry!.value), 'one')
      t.type(entry!.created, 'number')
      t.equal(await bucket.get('missing'), null, 'a key never written has no entry')
    })

    t.test('revisions increase by one per change across every key of the bucket', async (t) => {
      const { bucket } = await fresh(t, open)
      t.equal(await bucket.create('a', bytes('1')), 1)
      t.equal(await bucket.create('b', bytes('2')), 2)
      t.equal(await bucket.put('a', bytes('3')), 3)
      await bucket.delete('b')
      t.equal(await bucket.put('c', bytes('5')), 5, 'a delete takes a revision too')
      t.same(await bucket.status(), { bucket: bucket.name, values: 2, revision: 5 })
    })

    t.test('a create of a key that has a value fails with exists and changes nothing', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('a', bytes('first'))
      await t.rejects(bucket.create('a', bytes('second')), { code: 'exists', transient: false })
      t.equal(text((await bucket.get('a'))!.value), 'first')
      t.equal((await bucket.status()).revision, 1)
    })

    t.test('a create of a deleted key succeeds', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('a', bytes('first'))
      await bucket.delete('a')
      t.equal(await bucket.get('a'), null)
      t.equal(await bucket.create('a', bytes('again')), 3)
    })

    t.test('an update with the current revision writes; with any other it fails with wrong_revision', async (t) => {
      const { bucket } = await fresh(t, open)
      const r1 = await bucket.create('a', bytes('v1'))
      const r2 = await bucket.update('a', bytes('v2'), r1)
      t.equal(r2, r1 + 1)
      await t.rejects(bucket.update('a', bytes('stale'), r1), { code: 'wrong_revision', transient: false })
      await t.rejects(bucket.update('a', bytes('future'), r2 + 5), { code: 'wrong_revision' })
      t.equal(text((await bucket.get('a'))!.value), 'v2')
    })

    t.test('an update of a key without a value fails with wrong_revision', async (t) => {
      const { bucket } = await fresh(t, open)
      await t.rejects(bucket.update('never', bytes('x'), 1), { code: 'wrong_revision' })
      const r = await bucket.create('gone', bytes('x'))
      await bucket.delete('gone')
      await t.rejects(bucket.update('gone', bytes('y'), r), { code: 'wrong_revision' }, 'the deleted value\'s revision no longer counts')
      t.equal(await bucket.get('gone'), null)
    })

    t.test('a delete with a revision deletes only that value', async (t) => {
      const { bucket } = await fresh(t, open)
      const r1 = await bucket.create('a', bytes('v1'))
      const r2 = await bucket.update('a', bytes('v2'), r1)
      await t.rejects(bucket.delete('a', { revision: r1 }), { code: 'wrong_revision' })
      t.not(await bucket.get('a'), null)
      await bucket.delete('a', { revision: r2 })
      t.equal(await bucket.get('a'), null)
      await bucket.delete('never-written')
      t.equal((await bucket.status()).values, 0)
    })

    t.test('of concurrent updates from one revision exactly one wins', async (t) => {
      const { bucket } = await fresh(t, open)
      const r = await bucket.create('counter', bytes('0'))
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => bucket.update('counter', bytes(`writer ${i}`), r)))
      const won = results.flatMap((res, i) => (res.status === 'fulfilled' ? [i] : []))
      t.equal(won.length, 1)
      for (const res of results) if (res.status === 'rejected') t.ok(isKvError(res.reason, 'wrong_revision'))
      t.equal(text((await bucket.get('counter'))!.value), `writer ${won[0]}`)
    })

    t.test('of concurrent creates of one key exactly one wins', async (t) => {
      const { bucket } = await fresh(t, open)
      const results = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => bucket.create('k', bytes(`${i}`))))
      t.equal(results.filter((r) => r.status === 'fulfilled').length, 1)
      t.equal(results.filter((r) => r.status === 'rejected' && isKvError(r.reason, 'exists')).length, 19)
    })

    t.test('keys outside the NATS subject form are refused with invalid_key', async (t) => {
      const { bucket } = await fresh(t, open)
      for (const key of ['', '.a', 'a.', 'a..b', 'a b', 'a:b', 'a*', 'a>', 'ä', 'x'.repeat(257)]) {
        await t.rejects(bucket.create(key, bytes('x')), { code: 'invalid_key' }, JSON.stringify(key.slice(0, 20)))
        await t.rejects(bucket.get(key), { code: 'invalid_key' })
      }
      t.equal(await bucket.create('rental.rnt_a-B=c/d', bytes('x')), 1, 'dots between tokens and - / _ = are allowed')
      t.equal(await bucket.create('x'.repeat(256), bytes('x')), 2)
    })

    t.test('a value over the bucket limit is refused with value_too_large', async (t) => {
      const { bucket } = await fresh(t, open, { maxKeys: 10, maxValueBytes: 100 })
      await t.rejects(bucket.create('a', new Uint8Array(101)), { code: 'value_too_large' })
      t.equal(await bucket.create('a', new Uint8Array(100)), 1)
      await t.rejects(bucket.put('a', new Uint8Array(101)), { code: 'value_too_large' })
    })

    t.test('a new key past maxKeys is refused with bucket_full; existing keys still change', async (t) => {
      const { bucket } = await fresh(t, open, { maxKeys: 3, maxValueBytes: 100 })
      for (const k of ['a', 'b', 'c']) await bucket.create(k, bytes(k))
      await t.rejects(bucket.create('d', bytes('d')), { code: 'bucket_full' })
      await t.rejects(bucket.put('d', bytes('d')), { code: 'bucket_full' })
      t.ok(await bucket.put('a', bytes('a2')))
      await bucket.delete('b')
      t.ok(await bucket.create('d', bytes('d')), 'a deleted key frees its place')
    })

    t.test('a revision that is no positive integer is refused with invalid_argument', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('a', bytes('x'))
      for (const r of [0, -1, 1.5, Number.NaN]) await t.rejects(bucket.update('a', bytes('y'), r), { code: 'invalid_argument' })
      await t.rejects(bucket.delete('a', { revision: 0 }), { code: 'invalid_argument' })
    })

    t.test('a watch hands out the current values in revision order, then every change as it comes', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('b', bytes('b1'))
      await bucket.create('a', bytes('a1'))
      await bucket.put('b', bytes('b2'))
      const watch = bucket.watch()
      const it = watch[Symbol.asyncIterator]()
      const initial = await take(it, 2)
      t.same(initial.map((e) => [e.key, e.revision, e.isUpdate, text(e.value)]), [['a', 2, false, 'a1'], ['b', 3, false, 'b2']])
      const next = it.next()
      await watch.initialized
      await bucket.update('a', bytes('a2'), 2)
      await bucket.delete('b')
      const first = (await next).value as KvWatchEntry
      const [second] = await take(it, 1)
      t.match(first, { key: 'a', revision: 4, operation: 'PUT', isUpdate: true })
      t.match(second, { key: 'b', revision: 5, operation: 'DEL', isUpdate: true })
      watch.stop()
      t.same(await it.next(), { value: undefined, done: true }, 'stop ends the iteration')
    })

    t.test('initialized resolves at once for an empty bucket', async (t) => {
      const { bucket } = await fresh(t, open)
      const watch = bucket.watch()
      await watch.initialized
      watch.stop()
      t.pass()
    })

    t.test('an updates_only watch skips the current values', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('a', bytes('old'))
      const watch = bucket.watch({ include: 'updates_only' })
      await bucket.put('a', bytes('new'))
      const [e] = await take(watch[Symbol.asyncIterator](), 1)
      t.match(e, { key: 'a', revision: 2, isUpdate: true })
      watch.stop()
    })

    t.test('a watch of a prefix sees only its keys', async (t) => {
      const { bucket } = await fresh(t, open)
      await bucket.create('rental.one', bytes('1'))
      await bucket.create('claims.one', bytes('x'))
      const watch = bucket.watch({ key: 'rental.>' })
      const it = watch[Symbol.asyncIterator]()
      await bucket.create('claims.two', bytes('x'))
      await bucket.create('rental.two', bytes('2'))
      const seen = await take(it, 2)
      t.same(seen.map((e) => e.key), ['rental.one', 'rental.two'])
      watch.stop()
    })

    t.test('several watches each get every change', async (t) => {
      const { bucket } = await fresh(t, open)
      const watches = [bucket.watch(), bucket.watch({ include: 'updates_only' })]
      for (let i = 0; i < 5; i++) await bucket.put(`k${i}`, bytes(`${i}`))
      for (const w of watches) {
        t.same((await take(w[Symbol.asyncIterator](), 5)).map((e) => e.revision), [1, 2, 3, 4, 5])
        w.stop()
      }
    })

    t.test('values and the revision count survive a reopen, a deletion last included', async (t) => {
      const { bucket, reopen } = await fresh(t, open)
      await bucket.create('a', bytes('kept'))
      await bucket.create('b', bytes('deleted'))
      await bucket.delete('b')
      await bucket.close()
      const again = await reopen()
      t.equal(text((await again.get('a'))!.value), 'kept')
      t.equal(await again.get('b'), null)
      t.equal(await again.put('c', bytes('x')), 4, 'no revision is given out twice')
    })

    t.test('a closed bucket refuses calls with closed; close twice is safe', async (t) => {
      const { bucket } = await fresh(t, open)
      const watch = bucket.watch()
      await bucket.close()
      await bucket.close()
      await t.rejects(bucket.create('a', bytes('x')), { code: 'closed' })
      await t.rejects(bucket.get('a'), { code: 'closed' })
      t.same(await watch[Symbol.asyncIterator]().next(), { value: undefined, done: true }, 'the watch ends')
    })

    t.test('any sequence of operations follows the revision rules of a model, and reopens as the model', async (t) => {
      const op = fc.oneof(
        fc.record({ kind: fc.constant('create' as const), key: fc.constantFrom('a', 'b', 'c'), value: fc.string({ maxLength: 8 }) }),
        fc.record({ kind: fc.constant('put' as const), key: fc.constantFrom('a', 'b', 'c'), value: fc.string({ maxLength: 8 }) }),
        fc.record({ kind: fc.constant('update' as const), key: fc.constantFrom('a', 'b', 'c'), value: fc.string({ maxLength: 8 }), back: fc.integer({ min: -1, max: 2 }) }),
        fc.record({ kind: fc.constant('delete' as const), key: fc.constantFrom('a', 'b', 'c'), back: fc.option(fc.integer({ min: -1, max: 2 })) }),
      )
      await fc.assert(
        fc.asyncProperty(fc.array(op, { maxLength: 25 }), async (ops) => {
          const dir = await mkdtemp(join(tmpdir(), 'kv-model-'))
          try {
            let bucket = await open(dir, 'model', LIMITS)
            const model = new Map<string, { revision: number; value: string }>()
            let revision = 0
            for (const o of ops) {
              const held = model.get(o.key)
              // `back` picks the current revision (0), an older one, or one not given out yet.
              const asked = (back: number) => (held?.revision ?? revision + 1) - back
              if (o.kind === 'create') {
                const r = await bucket.create(o.key, bytes(o.value)).catch((e: unknown) => e)
                if (held !== undefined) { if (!isKvError(r, 'exists')) return false }
                else { if (r !== ++revision) return false; model.set(o.key, { revision, value: o.value }) }
              } else if (o.kind === 'put') {
                if ((await bucket.put(o.key, bytes(o.value))) !== ++revision) return false
                model.set(o.key, { revision, value: o.value })
              } else if (o.kind === 'update') {
                const want = asked(o.back)
                if (want < 1) continue
                const r = await bucket.update(o.key, bytes(o.value), want).catch((e: unknown) => e)
                if (held?.revision === want) { if (r !== ++revision) return false; model.set(o.key, { revision, value: o.value }) }
                else if (!isKvError(r, 'wrong_revision')) return false
              } else {
                const want = o.back === null ? undefined : asked(o.back)
                if (want !== undefined && want < 1) continue
                const r = await bucket.delete(o.key, want === undefined ? undefined : { revision: want }).then(() => 'ok', (e: unknown) => e)
                if (want !== undefined && held?.revision !== want) { if (!isKvError(r, 'wrong_revision')) return false }
                else if (r !== 'ok') return false
                else if (held !== undefined) { revision++; model.delete(o.key) }
              }
            }
            await bucket.close()
            bucket = await open(dir, 'model', LIMITS)
            try {
              if ((await bucket.status()).revision !== revision) return false
              for (const key of ['a', 'b', 'c']) {
                const entry = await bucket.get(key)
                const want = model.get(key)
                if ((entry === null) !== (want === undefined)) return false
                if (entry !== null && (entry.revision !== want!.revision || text(entry.value) !== want!.value)) return false
              }
              return true
            } finally {
              await bucket.close()
            }
          } finally {
            await rm(dir, { recursive: true, force: true })
          }
        }),
        { numRuns: 60 },
      )
      t.pass('60 random sequences matched the model')
    })
  })
}
