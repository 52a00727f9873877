import t from 'tap'
import { receiptIdOf } from '../../receipts/index.js'
import { RecordedIdFilter } from '../../receipts/recorded-id-filter.js'
import { RecordedIdIndex, type RecordedIdSource } from '../../receipts/recorded-id-index.js'
import { receiptKeyOf } from '../../receipts/recorded-id-filter.js'

const idsOf = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => receiptIdOf('src', `${prefix}-${i}`))

t.test('the filter never clears an id it was given, and clears almost every other id while within capacity', async (t) => {
  const filter = new RecordedIdFilter(20_000)
  const given = idsOf('given', 20_000)
  for (const id of given) filter.add(id)
  t.equal(given.filter((id) => !filter.mayHold(id)).length, 0, 'no false negative')
  const others = idsOf('other', 20_000)
  const falsePositives = others.filter((id) => filter.mayHold(id)).length
  t.ok(falsePositives < 20_000 * 0.03, `false positives ${falsePositives} of 20,000 (about 1 % expected)`)
  t.equal(filter.bytes, Math.ceil((20_000 * 10) / 32) * 4, '10 bits an id')
})

t.test('a filter filled far past capacity answers "perhaps", and an id not of a receipt id\'s shape is always "perhaps"', async (t) => {
  const full = new RecordedIdFilter(10)
  for (const id of idsOf('many', 2000)) full.add(id)
  t.ok(idsOf('unseen', 100).every((id) => full.mayHold(id)))
  const empty = new RecordedIdFilter(1000)
  t.equal(empty.mayHold('rc_zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz'), true)
  t.equal(empty.mayHold('rc_'), true)
  t.equal(empty.mayHold(idsOf('x', 1)[0]!), false)
})

t.test('the index has no filter until its first build, and keeps ids recorded while a build reads the store', async (t) => {
  const stored = idsOf('stored', 50)
  let release!: () => void
  const gate = new Promise<void>((r) => (release = r))
  const source: RecordedIdSource = {
    count: async () => stored.length,
    async *keys() {
      yield* stored.slice(0, 25).map(receiptKeyOf)
      await gate
      yield* stored.slice(25).map(receiptKeyOf)
    },
  }
  const index = new RecordedIdIndex(source)
  t.equal(index.filter(), undefined, 'no filter: every id is looked up')
  const built = index.build()
  await new Promise((r) => setImmediate(r))
  const during = idsOf('during', 10)
  index.add(during)
  release()
  await built
  const filter = index.filter()!
  t.ok([...stored, ...during].every((id) => filter.mayHold(id)), 'what the store listed and what was recorded during the build')
  t.ok(filter.capacity >= 1_000_000, 'at least the smallest size')
  index.clear()
  t.equal(index.filter(), undefined)
})
