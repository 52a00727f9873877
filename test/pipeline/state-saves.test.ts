import t from 'tap'
import { scheduleStateSaves } from '../../pipeline/ingest/embedded/state-saves.js'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

t.test('saves come every interval; a slow save pushes the next one back to keep saving under its share of the time', async (t) => {
  const starts: number[] = []
  const saved: number[] = []
  let slow = true
  const saves = scheduleStateSaves({
    intervalMs: 20,
    maxShare: 0.25,
    save: async () => {
      starts.push(performance.now())
      // The first save takes 60 ms: the next may start no sooner than 240 ms after it began.
      await sleep(slow ? 60 : 1)
      slow = false
      return starts.length
    },
    onSaved: (n) => saved.push(n),
    onFailed: (err) => t.fail(String(err)),
  })
  while (starts.length < 4) await sleep(5)
  await saves.stop()
  const [a, b, c, d] = starts as [number, number, number, number]
  t.ok(b - a >= 60 + 240 - 5, `after the 60 ms save the next started ${Math.round(b - a)} ms after it, not 20`)
  t.ok(c - b >= 20 - 2 && d - c >= 20 - 2, 'fast saves come back to the interval')
  t.same(saved.slice(0, 3), [1, 2, 3], 'each save reported')
})

t.test('a save with nothing new is not reported; a failed one is, and saves go on', async (t) => {
  const results: Array<'nothing' | 'fail' | 'ok'> = ['nothing', 'fail', 'ok']
  const events: string[] = []
  const saves = scheduleStateSaves({
    intervalMs: 5,
    maxShare: 1,
    save: async () => {
      const r = results.shift() ?? 'nothing'
      if (r === 'fail') throw new Error('disk full')
      return r === 'ok' ? 'state' : undefined
    },
    onSaved: (s) => events.push(`saved ${s}`),
    onFailed: (err) => events.push(`failed ${(err as Error).message}`),
  })
  while (results.length > 0) await sleep(5)
  await sleep(20)
  await saves.stop()
  t.same(events, ['failed disk full', 'saved state'])
})

t.test('stop waits for the save under way and no save starts after it', async (t) => {
  let running = 0
  let finished = 0
  const saves = scheduleStateSaves({
    intervalMs: 1,
    maxShare: 1,
    save: async () => {
      running++
      await sleep(50)
      finished++
      return 1
    },
    onSaved: () => undefined,
    onFailed: () => undefined,
  })
  while (running === 0) await sleep(1)
  await saves.stop()
  t.equal(finished, 1, 'the save under way finished before stop resolved')
  await sleep(30)
  t.equal(running, 1, 'and none started after')
})

t.test('a report that throws does not end the saves', async (t) => {
  let saves = 0
  const scheduled = scheduleStateSaves({
    intervalMs: 2,
    maxShare: 1,
    save: async () => ++saves,
    onSaved: () => {
      throw new Error('the logger broke')
    },
    onFailed: () => undefined,
  })
  while (saves < 3) await sleep(2)
  await scheduled.stop()
  t.ok(saves >= 3, `${saves} saves`)
})
