import t from 'tap'
import { ConfigError, loadConfig } from '../../config/index.js'
import { RECORD_BATCH_MAX } from '../../receipts/index.js'
import { Backoff } from '../../recorder/index.js'

t.test('the recorder settings: defaults, bounds, and a misspelt RECORDER_ variable refused', async (t) => {
  const config = loadConfig({})
  t.same([config.RECORDER_BATCH, config.RECORDER_FLUSH_MS, config.RECORDER_RETRY_MAX_MS], [5000, 500, 30_000])
  t.equal(loadConfig({ RECORDER_BATCH: String(RECORD_BATCH_MAX) }).RECORDER_BATCH, RECORD_BATCH_MAX)
  t.throws(() => loadConfig({ RECORDER_BATCH: String(RECORD_BATCH_MAX + 1) }), { constructor: ConfigError, message: /^RECORDER_BATCH=.*\(1 to 10000\)/ }, 'one insert holds at most what the store takes')
  t.throws(() => loadConfig({ RECORDER_BATCH: '0' }), { constructor: ConfigError, message: /^RECORDER_BATCH=/ })
  t.throws(() => loadConfig({ RECORDER_RETRY_MAX_MS: '99' }), { constructor: ConfigError, message: /^RECORDER_RETRY_MAX_MS=/ })
  t.throws(() => loadConfig({ RECORDER_BATCH_SIZE: '100' }), { constructor: ConfigError, message: /^unknown variable RECORDER_BATCH_SIZE:/ })
})

t.test('backoff doubles from the base to the cap with half of each wait random, and starts at the cap for a slow error', async (t) => {
  const low = new Backoff({ baseMs: 100, maxMs: 1000, random: () => 0 })
  t.same([1, 2, 3, 4, 5, 6].map(() => low.next()), [50, 100, 200, 400, 500, 500])
  const high = new Backoff({ baseMs: 100, maxMs: 1000, random: () => 0.999999 })
  t.same([1, 2, 3, 4, 5].map(() => high.next()), [100, 200, 400, 800, 1000])
  t.equal(high.failures, 5)
  high.reset()
  t.equal(high.next(), 100, 'a success starts over')
  t.equal(new Backoff({ baseMs: 100, maxMs: 1000, random: () => 0 }).next(true), 500, 'a slow error waits half the cap to the cap at once')
  t.throws(() => new Backoff({ baseMs: 0, maxMs: 10 }), RangeError)
})
