import t from 'tap'
import { GroupCommit } from '../../storage/group-commit.js'

/** A commit that stays in flight until released, recording each batch. */
function gatedCommit(): { batches: number[][]; release: () => void; commit: (items: number[]) => Promise<void> } {
  const batches: number[][] = []
  let gate: (() => void) | undefined
  return {
    batches,
    release: () => gate?.(),
    commit: (items) => {
      batches.push(items)
      return new Promise<void>((resolve) => { gate = resolve })
    },
  }
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve))

t.test('items submitted while a commit is in flight go out together in the next commit', async (t) => {
  const g = gatedCommit()
  const gc = new GroupCommit<number>({ commit: g.commit })
  const first = gc.submit(1)
  await tick()
  const rest = [2, 3, 4, 5].map((n) => gc.submit(n))
  await tick()
  t.same(g.batches, [[1]], 'one commit at a time')
  g.release()
  await first
  await tick()
  t.same(g.batches, [[1], [2, 3, 4, 5]])
  g.release()
  await Promise.all(rest)
})

t.test('items submitted in the same tick share the first commit', async (t) => {
  const g = gatedCommit()
  const gc = new GroupCommit<number>({ commit: g.commit })
  const all = [1, 2, 3].map((n) => gc.submit(n))
  await tick()
  t.same(g.batches, [[1, 2, 3]])
  g.release()
  await Promise.all(all)
})

t.test('an item resolves only after the commit carrying it completes', async (t) => {
  const g = gatedCommit()
  const gc = new GroupCommit<number>({ commit: g.commit })
  let done = false
  const p = gc.submit(1).then(() => { done = true })
  await tick()
  t.equal(done, false)
  g.release()
  await p
  t.equal(done, true)
})

t.test('a failed commit rejects every item of its batch and only those', async (t) => {
  let calls = 0
  const gc = new GroupCommit<number>({
    commit: async () => {
      calls++
      if (calls === 1) throw new Error('disk on fire')
    },
  })
  const batch = [gc.submit(1), gc.submit(2)]
  for (const p of batch) await t.rejects(p, { message: 'disk on fire' })
  await gc.submit(3)
  t.equal(calls, 2)
})

t.test('a batch stops at maxBatchBytes but always carries at least one item', async (t) => {
  const batches: number[][] = []
  const gc = new GroupCommit<number>({
    commit: async (items) => { batches.push(items) },
    sizeOf: (n) => n,
    maxBatchBytes: 10,
  })
  await Promise.all([4, 4, 4, 20, 1].map((n) => gc.submit(n)))
  t.same(batches, [[4, 4], [4], [20], [1]])
})

t.test('drain waits for everything submitted', async (t) => {
  const g = gatedCommit()
  const gc = new GroupCommit<number>({ commit: g.commit })
  void gc.submit(1)
  let drained = false
  const d = gc.drain().then(() => { drained = true })
  await tick()
  t.equal(drained, false)
  g.release()
  await d
  t.equal(drained, true)
})
