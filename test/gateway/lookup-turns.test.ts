import t from 'tap'
import { LookupTurns, LOOKUPS_WAITING_MAX } from '../../gateway/control/dispute-routes.js'

t.test('dispute look-ups run one at a time, and past the waiting bound a request is shed with 503 and Retry-After', async (t) => {
  const turns = new LookupTurns()
  let running = 0
  let most = 0
  const releases: Array<() => void> = []
  const task = () =>
    new Promise<void>((resolve) => {
      running++
      most = Math.max(most, running)
      releases.push(() => {
        running--
        resolve()
      })
    })
  const admitted = Array.from({ length: LOOKUPS_WAITING_MAX }, () => turns.run(task))
  t.throws(() => turns.run(task), { code: 'overloaded', status: 503, retryAfter: 1 })
  for (let i = 0; i < LOOKUPS_WAITING_MAX; i++) {
    await new Promise((resolve) => setImmediate(resolve))
    t.equal(releases.length, i + 1, 'the next starts only once the one before ends')
    releases[i]!()
  }
  await Promise.all(admitted)
  t.equal(most, 1)
  await t.resolves(turns.run(async () => undefined), 'room again once they are done')
  const failing = turns.run(async () => {
    throw new Error('log read failed')
  })
  await t.rejects(failing)
  await t.resolves(turns.run(async () => undefined), 'a failed turn does not block the next')
})
