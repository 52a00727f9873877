import t from 'tap'
import { KV_LIMITS, KvError, type KvEntry } from '../../storage/index.js'
import { KvWatchQueue } from '../../storage/kv-watch-queue.js'

const entry = (key: string, revision: number): KvEntry => ({ bucket: 'b', key, value: new Uint8Array(0), revision, created: 0, operation: 'PUT' })

t.test('a watch whose consumer falls watchBacklog changes behind ends with watch_overflow, and lets go of them', async (t) => {
  let stopped = 0
  const queue = new KvWatchQueue(undefined, [entry('first', 1)], () => stopped++)
  for (let r = 2; r <= KV_LIMITS.watchBacklog + 2; r++) queue.offer(entry('k', r))
  t.equal(stopped, 1, 'it left the bucket, which hands it nothing more')
  const it = queue[Symbol.asyncIterator]()
  await t.rejects(it.next(), { code: 'watch_overflow', transient: true })
  t.same(await it.next(), { value: undefined, done: true })
})

t.test('the current values a watch starts with do not count against its backlog', async (t) => {
  const initial = Array.from({ length: 1000 }, (_, i) => entry(`k${i}`, i + 1))
  const queue = new KvWatchQueue(undefined, initial, () => undefined)
  for (let r = 1001; r <= 1000 + KV_LIMITS.watchBacklog; r++) queue.offer(entry('k', r))
  const it = queue[Symbol.asyncIterator]()
  let n = 0
  for (;;) {
    const r = await it.next()
    n++
    if (r.value?.revision === 1000 + KV_LIMITS.watchBacklog) break
  }
  t.equal(n, 1000 + KV_LIMITS.watchBacklog)
  queue.stop()
})

t.test('a waiting consumer is handed a change at once, and initialized waits for it to take the current values', async (t) => {
  const queue = new KvWatchQueue('rental.>', [entry('rental.a', 1)], () => undefined)
  let initialized = false
  void queue.initialized.then(() => (initialized = true))
  const it = queue[Symbol.asyncIterator]()
  t.match((await it.next()).value, { key: 'rental.a', isUpdate: false })
  await new Promise((r) => setImmediate(r))
  t.equal(initialized, false, 'the consumer has not asked for more yet')
  const waiting = it.next()
  await new Promise((r) => setImmediate(r))
  t.equal(initialized, true)
  queue.offer(entry('claims.x', 2))
  queue.offer(entry('rental.b', 3))
  t.match((await waiting).value, { key: 'rental.b', revision: 3, isUpdate: true }, 'a key outside the filter is not handed out')
  await it.return!()
  t.same(await it.next(), { value: undefined, done: true }, 'breaking out of the loop stops the watch')
})

t.test('current values that arrive one by one: deletions skipped, initialized only after currentDone and their taking', async (t) => {
  const queue = new KvWatchQueue(undefined, [], () => undefined, { currentToCome: true })
  let initialized = false
  void queue.initialized.then(() => (initialized = true))
  queue.offerCurrent(entry('a', 1))
  queue.offerCurrent({ ...entry('gone', 2), operation: 'DEL' })
  const it = queue[Symbol.asyncIterator]()
  t.match((await it.next()).value, { key: 'a', isUpdate: false })
  const waiting = it.next()
  await new Promise((r) => setImmediate(r))
  t.equal(initialized, false, 'more current values may come')
  queue.currentDone()
  await new Promise((r) => setImmediate(r))
  t.equal(initialized, true, 'done, and the consumer asked past the last')
  queue.offer(entry('b', 3))
  t.match((await waiting).value, { key: 'b', revision: 3, isUpdate: true }, 'the deletion among the current values was not handed out')
  queue.stop()
})

t.test('a watch with no current value is initialized at currentDone, without being read', async (t) => {
  const queue = new KvWatchQueue(undefined, [], () => undefined, { currentToCome: true })
  queue.offerCurrent({ ...entry('gone', 1), operation: 'DEL' })
  queue.currentDone()
  await queue.initialized
  t.pass()
  queue.stop()
})

t.test('fail ends the iteration with the error, and the backlog option bounds the queue', async (t) => {
  let stopped = 0
  const queue = new KvWatchQueue(undefined, [], () => stopped++, { backlog: 2 })
  queue.offer(entry('a', 1))
  queue.offer(entry('b', 2))
  queue.offer(entry('c', 3))
  t.equal(stopped, 1, 'past a backlog of 2')
  await t.rejects(queue[Symbol.asyncIterator]().next(), { code: 'watch_overflow' })
  const failing = new KvWatchQueue(undefined, [], () => undefined)
  const waiting = failing[Symbol.asyncIterator]().next()
  failing.fail(new KvError('closed', 'gone'))
  await t.rejects(waiting, { code: 'closed' })
})
