import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { TEST_WINDOW_MS, WebhookState } from '../../delivery/webhooks/webhook-state.js'
import { fileKvBuckets } from '../../storage/index.js'

/**
 * The test-request allowance of a rental, on the webhooks bucket (a real file KV bucket):
 * at most N in any minute, counted exactly by every process sharing the bucket.
 */

async function bucketOf(t: Test) {
  const dir = await mkdtemp(join(tmpdir(), 'webhook-tests-'))
  const bucket = await fileKvBuckets({ dir })('webhooks', { maxKeys: 100, maxValueBytes: 512 * 1024 })
  t.teardown(async () => {
    await bucket.close()
    await rm(dir, { recursive: true, force: true })
  })
  return bucket
}

t.test('concurrent takes from two states sharing the bucket grant exactly the allowance, no more', async (t) => {
  const bucket = await bucketOf(t)
  const a = new WebhookState(bucket)
  const b = new WebhookState(bucket)
  const now = Date.now()
  const waits = await Promise.all(Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).takeTestPlace('rnt_x', 10, now)))
  t.equal(waits.filter((w) => w === 0).length, 10, 'ten places taken')
  t.ok(waits.filter((w) => w > 0).every((w) => w === TEST_WINDOW_MS), 'the others wait until the first place frees, a minute on')
  t.equal(await a.takeTestPlace('rnt_y', 10, now), 0, 'another rental has its own allowance')
})

t.test('a place frees a minute after it was taken: the wait names the oldest time in the window', async (t) => {
  const state = new WebhookState(await bucketOf(t))
  const start = 1_000_000
  for (let i = 0; i < 3; i++) t.equal(await state.takeTestPlace('rnt_x', 3, start + i * 10_000), 0, `take ${i + 1} at ${i * 10} s`)
  t.equal(await state.takeTestPlace('rnt_x', 3, start + 30_000), 30_000, 'refused at 30 s: the first place frees at 60 s')
  t.equal(await state.takeTestPlace('rnt_x', 3, start + 59_999), 1, 'refused 1 ms before it frees')
  t.equal(await state.takeTestPlace('rnt_x', 3, start + 60_000), 0, 'taken once the first left the window')
  t.equal(await state.takeTestPlace('rnt_x', 3, start + 60_001), 9_999, 'now the second place (taken at 10 s) is the next to free')
  t.equal(await state.takeTestPlace('rnt_x', 2, start + 60_001), 19_999, 'a lower allowance counts the same times: two must leave, the one of 20 s last')
})

t.test('a refused take writes nothing: a flood of refusals costs reads only', async (t) => {
  const bucket = await bucketOf(t)
  const state = new WebhookState(bucket)
  const now = Date.now()
  t.equal(await state.takeTestPlace('rnt_x', 1, now), 0)
  const before = (await bucket.status()).revision
  for (let i = 0; i < 20; i++) t.ok((await state.takeTestPlace('rnt_x', 1, now + i)) > 0, `refusal ${i + 1}`)
  t.equal((await bucket.status()).revision, before, 'no write')
})

t.test('the times are forgotten only once none is left in the window', async (t) => {
  const bucket = await bucketOf(t)
  const state = new WebhookState(bucket)
  const start = 1_000_000
  t.equal(await state.takeTestPlace('rnt_x', 1, start), 0)
  await state.forgetTestPlaces('rnt_x', start + 1000)
  t.equal(await state.takeTestPlace('rnt_x', 1, start + 2000), TEST_WINDOW_MS - 2000, 'still counted inside the window')
  await state.forgetTestPlaces('rnt_x', start + TEST_WINDOW_MS)
  t.equal(await bucket.get('tests.rnt_x'), null, 'deleted once the window passed')
})
