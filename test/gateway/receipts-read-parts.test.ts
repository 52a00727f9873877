import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { ExportSlots, KvUsageMeter, MemoryReadRateLimiter } from '../../gateway/reads/index.js'
import { RowCounter } from '../../gateway/reads/row-counter.js'
import { storeError } from '../../gateway/reads/read-route.js'
import { ReceiptStoreError } from '../../receipts/index.js'
import { ApiError } from '../../schemas/index.js'
import { fileKvBuckets } from '../../storage/index.js'

t.test('read allowance: a minute\'s worth at once, then one per 60/rate seconds, with the wait to retry', async (t) => {
  let now = 0
  const limiter = new MemoryReadRateLimiter(1000, () => now)
  for (let i = 0; i < 6; i++) t.equal(await limiter.take('a', 6), 0)
  t.equal(await limiter.take('a', 6), 10, 'the 7th of 6 a minute waits 10 s')
  t.equal(await limiter.take('b', 6), 0, 'another key has its own')
  now += 10_000
  t.equal(await limiter.take('a', 6), 0, 'one back after 10 s')
  t.equal(await limiter.take('a', 6), 10)
})

t.test('read allowances are bounded: past maxTracked the least recently used is forgotten', async (t) => {
  const limiter = new MemoryReadRateLimiter(1000, () => 0)
  await limiter.take('kept', 1)
  for (let i = 0; i < 5000; i++) {
    await limiter.take(`k${i}`, 1)
    if (i % 100 === 0) t.equal(await limiter.take('kept', 1) > 0, true) // used recently: kept, and still empty
  }
  t.equal(limiter.size, 1000)
  t.equal(await limiter.take('k0', 1), 0, 'a forgotten key starts full')
})

t.test('export slots: per caller and in all, each given back once', async (t) => {
  const slots = new ExportSlots(2, 3)
  const a1 = slots.take('a')
  const a2 = slots.take('a')
  t.same(slots.take('a'), { refused: 'caller' })
  const b1 = slots.take('b')
  t.same(slots.take('c'), { refused: 'total' })
  if (!('release' in a1) || !('release' in a2) || !('release' in b1)) throw new Error('refused')
  a1.release()
  a1.release()
  t.equal(slots.inUse, 2, 'a second release gives nothing back twice')
  t.ok('release' in slots.take('c'))
})

t.test('row counts: NDJSON lines; CSV records, quoted newlines and the header aside, across chunk cuts', async (t) => {
  const nd = new RowCounter('ndjson')
  t.equal(nd.add(Buffer.from('{"a":"x\\ny"}\n{"a":1}\n{"a"')) + nd.add(Buffer.from(':2}\n')), 3)
  const csv = new RowCounter('csv')
  const text = '"h1","h2"\n1,"a ""quoted""\nline"\n2,"plain, comma"\n3,\n'
  let rows = 0
  for (let i = 0; i < text.length; i += 7) rows += csv.add(Buffer.from(text.slice(i, i + 7)))
  t.equal(rows, 3)
})

t.test('store failures: unavailable is 503 receipts_unavailable with Retry-After; a bad cursor is 400', async (t) => {
  const unavailable = storeError(new ReceiptStoreError('unavailable', 'down')) as ApiError
  t.match(unavailable, { code: 'receipts_unavailable', status: 503, retryAfter: 2 })
  t.match(storeError(new ReceiptStoreError('invalid_cursor', 'cursor is not valid: x')), { code: 'invalid_request', status: 400 })
  const other = new Error('x')
  t.equal(storeError(other), other, 'anything else stays a fault (500)')
})

t.test('usage meter: two meters on one bucket (two processes) both count; days and months kept apart', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'usage-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const open = fileKvBuckets({ dir, onFailure: (err) => t.fail(String(err)) })
  const bucket = await open('usage', KvUsageMeter.bucketLimits)
  const day1 = Date.parse('2030-01-31T10:00:00Z')
  const day2 = Date.parse('2030-02-01T10:00:00Z')
  const one = new KvUsageMeter(bucket)
  const two = new KvUsageMeter(bucket)
  const caller = { role: 'renter', subject: 'acme:desk.1' }
  for (let i = 0; i < 50; i++) {
    one.add(caller, 3, day1)
    two.add(caller, 2, day1)
  }
  one.add(caller, 7, day2)
  t.equal((await one.read(caller, '2030-01')).rows_exported, 150, 'counts not yet written are read too')
  await Promise.all([one.flush(), two.flush()])
  const jan = await two.read(caller, '2030-01')
  t.same(jan, { role: 'renter', subject: 'acme:desk.1', month: '2030-01', rows_exported: 250, days: [{ day: '2030-01-31', rows_exported: 250 }] })
  t.equal((await two.read(caller, '2030-02')).rows_exported, 7)
  t.equal((await two.read({ role: 'creator', subject: 'acme:desk.1' }, '2030-01')).rows_exported, 0, 'per role and subject')
  await one.close()
  await two.close()
  await bucket.close()
  const again = await open('usage', KvUsageMeter.bucketLimits)
  const reopened = new KvUsageMeter(again)
  t.equal((await reopened.read(caller, '2030-01')).rows_exported, 250, 'durable')
  await reopened.close()
  await again.close()
})
