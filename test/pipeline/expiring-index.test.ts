import fc from 'fast-check'
import t from 'tap'
import { ExpiringIndex, ShardedExpiringIndex } from '../../pipeline/ingest/embedded/expiring-index.js'

type Op = { kind: 'insert'; key: number; ttl: number } | { kind: 'tick'; by: number }

/**
 * The index against a plain Map model, over random sequences of inserts and clock
 * ticks (with expiry out of insertion order). Keys come from a small range so probe chains collide and wrap, which is
 * where backward-shift deletion and ring growth go wrong if they do.
 */
t.test('property: the index answers like a Map of key → expiry under any sequence of operations', async (t) => {
  const op = fc.oneof(
    fc.record({ kind: fc.constant('insert' as const), key: fc.integer({ min: 0, max: 40 }), ttl: fc.integer({ min: 0, max: 50 }) }),
    fc.record({ kind: fc.constant('tick' as const), by: fc.integer({ min: 0, max: 20 }) }),
  )
  fc.assert(
    // Growing early (growAtFill below 1) doubles a ring that is not full, whose copies carry unused slots.
    fc.property(fc.array(op, { maxLength: 400 }), fc.constantFrom(1, 0.9, 0.51), (ops: Op[], growAtFill: number) => {
      const index = new ExpiringIndex({ initialCapacity: 16, growAtFill })
      const value = index.column((n) => new Float64Array(n))
      const model = new Map<number, { expiresAt: number; slot: number; v: number }>()
      let now = 0
      for (const o of ops) {
        if (o.kind === 'tick') {
          now += o.by
          index.expire(now, 3)
          continue
        }
        // Two-word keys that share the low word, to force probing.
        const hi = o.key % 7
        const lo = o.key
        const live = model.get(o.key)
        const alive = live !== undefined && live.expiresAt >= now
        if (!alive) {
          const slot = index.insert(hi, lo, now + o.ttl)
          value()[slot] = o.key * 10
          model.set(o.key, { expiresAt: now + o.ttl, slot, v: o.key * 10 })
        }
        for (let k = 0; k <= 40; k++) {
          const m = model.get(k)
          const expected = m !== undefined && m.expiresAt >= now
          const slot = index.find(k % 7, k, now)
          if ((slot >= 0) !== expected) return false
          if (expected && value()[slot] !== m!.v) return false
          if (expected) m!.slot = slot
        }
      }
      return true
    }),
    { numRuns: 300 },
  )
  t.pass('matched the model')
})

t.test('expired entries leave from the head and the ring grows past its first capacity', async (t) => {
  const index = new ExpiringIndex({ initialCapacity: 16 })
  for (let i = 0; i < 1000; i++) index.insert(i, i * 3, i)
  t.equal(index.size, 1000)
  t.ok(index.find(999, 2997, 0) >= 0)
  index.expire(500)
  t.equal(index.size, 500, 'entries that expired before 500 are gone; 500 itself is still live')
  t.equal(index.find(10, 30, 500), -1)
  t.ok(index.find(700, 2100, 500) >= 0)
})

t.test('a ring grows at its fill level, not only when full', async (t) => {
  const index = new ExpiringIndex({ initialCapacity: 64, growAtFill: 0.75 })
  for (let i = 0; i < 47; i++) index.insert(i, i, 1)
  t.equal(index.capacity, 64, '47 of 64: below the fill level')
  index.insert(47, 47, 1)
  t.equal(index.capacity, 64, 'the 48th entry fills it to 75 %')
  index.insert(48, 48, 1)
  t.equal(index.capacity, 128, 'the next insert doubles it')
  for (let i = 0; i < 49; i++) t.ok(index.find(i, i, 0) >= 0, `entry ${i} survives the growth`)
  t.throws(() => new ExpiringIndex({ initialCapacity: 16, growAtFill: 0.5 }), RangeError)
})

/**
 * Keys that spread perfectly evenly over the shards are the worst case: if every shard
 * grew only when full, all 32 would double within 32 inserts of each other, one stall
 * after another.
 */
t.test('the shards of a sharded index do not grow all at once', async (t) => {
  const perShard = 256
  const index = new ShardedExpiringIndex({ initialCapacity: perShard * ShardedExpiringIndex.SHARDS })
  const grewAt: number[] = []
  const capacities = index.shards.map((s) => s.capacity)
  // One round more than the shards' capacity, so that the shards growing only when full grow too.
  for (let i = 0; i < (perShard + 1) * ShardedExpiringIndex.SHARDS; i++) {
    const shard = i % ShardedExpiringIndex.SHARDS
    index.shards[shard]!.insert(shard, i, 1)
    if (index.shards[shard]!.capacity !== capacities[shard]) {
      capacities[shard] = index.shards[shard]!.capacity
      grewAt.push(i)
    }
  }
  t.equal(grewAt.length, ShardedExpiringIndex.SHARDS, 'every shard doubled once on the way to its first capacity')
  const gaps = grewAt.slice(1).map((at, i) => at - grewAt[i]!)
  t.ok(Math.min(...gaps) >= 32, `consecutive growths are at least a round of the shards apart (smallest gap ${Math.min(...gaps)})`)
  const span = grewAt[grewAt.length - 1]! - grewAt[0]!
  t.ok(span >= perShard * ShardedExpiringIndex.SHARDS * 0.3, `the growths spread over ${span} of ${perShard * ShardedExpiringIndex.SHARDS} inserts`)
})

t.test('property: live entries exported and imported into an empty index answer the same, with their columns; expired ones stay behind', async (t) => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ key: fc.integer({ min: 0, max: 200 }), ttl: fc.integer({ min: 0, max: 60 }), wait: fc.integer({ min: 0, max: 3 }) }), { maxLength: 300 }),
      fc.integer({ min: 0, max: 80 }),
      (ops, later) => {
        const index = new ExpiringIndex({ initialCapacity: 16 })
        const pair = index.column((n) => new Uint32Array(n), 2)
        let now = 0
        for (const o of ops) {
          now += o.wait
          index.expire(now, 2)
          if (index.find(o.key % 11, o.key, now) >= 0) continue
          const slot = index.insert(o.key % 11, o.key, now + o.ttl)
          pair()[slot * 2] = o.key
          pair()[slot * 2 + 1] = o.ttl
        }
        const exportedAt = now + later
        const part = index.exportLive(exportedAt)
        const copy = new ExpiringIndex({ initialCapacity: 16 })
        const copyPair = copy.column((n) => new Uint32Array(n), 2)
        copy.importPart(part, exportedAt)
        let live = 0
        for (let k = 0; k <= 200; k++) {
          const a = index.find(k % 11, k, exportedAt)
          const b = copy.find(k % 11, k, exportedAt)
          if ((a >= 0) !== (b >= 0)) return false
          if (a < 0) continue
          live++
          if (copyPair()[b * 2] !== pair()[a * 2] || copyPair()[b * 2 + 1] !== pair()[a * 2 + 1]) return false
        }
        return copy.size === live && part.count === live
      },
    ),
    { numRuns: 300 },
  )
  t.pass('matched the original')
})

t.test('an index part of another shape is refused', async (t) => {
  const index = new ExpiringIndex({ initialCapacity: 16 })
  index.column((n) => new Uint32Array(n), 2)
  index.insert(1, 1, 10)
  const part = index.exportLive(0)
  const narrower = new ExpiringIndex({ initialCapacity: 16 })
  narrower.column((n) => new Uint32Array(n), 1)
  t.throws(() => narrower.importPart(part, 0), RangeError)
  t.throws(() => new ExpiringIndex({ initialCapacity: 16 }).importPart(part, 0), RangeError, 'a missing column')
  t.throws(() => index.importPart({ ...part, count: 2 }, 0), RangeError, 'a count its arrays do not hold')
})

t.test('a part whose keys crowd into one place of the table is refused after bounded work; random keys import in full', async (t) => {
  const n = 60_000
  const crowded = { count: n, keyHi: new Uint32Array(n).fill(7), keyLo: new Uint32Array(n).fill(9), expiresAt: new Float64Array(n).fill(100), columns: [] }
  // Unbounded, this steps over n²/2 = 1.8 billion cells; the budget stops it a few thousand entries in.
  const index = new ExpiringIndex({ initialCapacity: 16 })
  t.throws(() => index.importPart(crowded, 0), { name: 'RangeError', message: /crowd/ })
  t.ok(index.size < 5000, `refused after ${index.size} entries`)

  const random = { ...crowded, keyHi: new Uint32Array(n), keyLo: new Uint32Array(n) }
  for (let i = 0; i < n; i++) {
    random.keyHi[i] = (Math.random() * 2 ** 32) >>> 0
    random.keyLo[i] = (Math.random() * 2 ** 32) >>> 0
  }
  const copy = new ExpiringIndex({ initialCapacity: 16 })
  copy.importPart(random, 0)
  t.equal(copy.size, n, 'keys spread by a hash stay far inside the budget')
})

t.test('an export of a ring that wraps, with an entry expired out of order in the middle, copies each run of live entries in ring order', async (t) => {
  const index = new ExpiringIndex({ initialCapacity: 16 })
  const tag = index.column((n) => new Uint32Array(n), 2)
  const add = (key: number, expiresAt: number) => {
    const slot = index.insert(key, key, expiresAt)
    tag()[slot * 2] = key
    tag()[slot * 2 + 1] = key * 10
  }
  // Slots 0..11, then the first ten expire and leave from the head: the ring starts at slot 10.
  for (let key = 0; key < 12; key++) add(key, key < 10 ? 5 : 100)
  index.expire(6)
  // Ten more wrap around to slots 12..15 and 0..5; key 14 (slot 14) expires early, out of order.
  for (let key = 12; key < 22; key++) add(key, key === 14 ? 7 : 100)
  t.equal(index.size, 12)
  const part = index.exportLive(8)
  const expected = [10, 11, 12, 13, 15, 16, 17, 18, 19, 20, 21]
  t.equal(part.count, expected.length)
  t.same([...part.keyHi], expected, 'keys in ring order, the expired one left out')
  t.same([...part.expiresAt], expected.map(() => 100))
  t.same([...(part.columns[0] as Uint32Array)], expected.flatMap((k) => [k, k * 10]), 'a two-wide column moves with its entries')
})
