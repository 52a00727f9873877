import t from 'tap'
import { pageAfter } from '../../gateway/control/paging.js'

interface Item {
  id: string
  at: number
}

const ids = (items: Item[]) => items.map((i) => i.id)
const idOf = (i: Item) => i.id
const timeOf = (i: Item) => i.at
// Two items share a millisecond (b, c): ids alone cannot order them.
const items: Item[] = [
  { id: 'a', at: 10 },
  { id: 'b', at: 20 },
  { id: 'c', at: 20 },
  { id: 'd', at: 30 },
  { id: 'e', at: 40 },
]

t.test('a cursor names an item and carries its time; paging reaches every item once', async (t) => {
  const seen: string[] = []
  let cursor: string | undefined
  for (let pages = 0; pages < 10; pages++) {
    const page: ReturnType<typeof pageAfter<Item>> = pageAfter(items, idOf, cursor, 2, undefined, timeOf)
    seen.push(...ids(page.items))
    if (page.nextCursor === null) break
    cursor = page.nextCursor
  }
  t.same(seen, ['a', 'b', 'c', 'd', 'e'])
  t.equal(pageAfter(items, idOf, undefined, 2, undefined, timeOf).nextCursor, 'b.20')
})

t.test('a cursor whose item is gone resumes at its millisecond: an item of it may come again, none is skipped', async (t) => {
  const without = (id: string) => items.filter((i) => i.id !== id)
  t.same(ids(pageAfter(without('b'), idOf, 'b.20', 10, undefined, timeOf).items), ['c', 'd', 'e'], 'b gone: c, of its millisecond and after it, is listed')
  t.same(ids(pageAfter(without('c'), idOf, 'c.20', 10, undefined, timeOf).items), ['b', 'd', 'e'], 'c gone: b, listed before, comes again')
  t.same(ids(pageAfter(without('d'), idOf, 'd.30', 10, undefined, timeOf).items), ['e'])
  t.same(ids(pageAfter(without('e'), idOf, 'e.40', 10, undefined, timeOf).items), [], 'nothing after the last')
  t.same(ids(pageAfter(items, idOf, 'b.20', 10, undefined, timeOf).items), ['c', 'd', 'e'], 'with the item present, the page follows it exactly')
  t.same(ids(pageAfter(items, idOf, 'c.20', 10, undefined, timeOf).items), ['d', 'e'], 'and an earlier item of its millisecond does not come again')
})

t.test('a cursor that names nothing is refused, as is a malformed time', async (t) => {
  t.throws(() => pageAfter(items, idOf, 'zz', 2, undefined, timeOf), { code: 'invalid_request' }, 'a bare id of no item')
  t.throws(() => pageAfter(items, idOf, 'zz', 2), { code: 'invalid_request' }, 'untimed paging too')
  t.throws(() => pageAfter(items, idOf, 'b.2x', 2, undefined, timeOf), { code: 'invalid_request' })
  t.throws(() => pageAfter(items, idOf, '.5', 2, undefined, timeOf), { code: 'invalid_request' }, 'a time without an id')
  t.same(ids(pageAfter(items, idOf, 'b', 10, undefined, timeOf).items), ['c', 'd', 'e'], 'a bare id, as cursors were before, still reads')
})
