import t from 'tap'
import { ConfigError, loadConfig } from '../../config/index.js'

t.test('journal retention settings: defaults, bounds, and at least the dedup window', async (t) => {
  const config = loadConfig({})
  t.equal(config.JOURNAL_RETENTION_MAX_AGE_S, 7 * 86_400)
  t.equal(config.JOURNAL_RETENTION_MAX_BYTES, 32 * 1024 ** 3)
  t.equal(loadConfig({ JOURNAL_RETENTION_MAX_AGE_S: '86400', DEDUP_WINDOW_S: '1800' }).JOURNAL_RETENTION_MAX_AGE_S, 86_400)
  t.throws(() => loadConfig({ JOURNAL_RETENTION_MAX_AGE_S: '7200', DEDUP_WINDOW_S: '86400' }), { constructor: ConfigError, message: /^JOURNAL_RETENTION_MAX_AGE_S=7200 is shorter than DEDUP_WINDOW_S=86400/ })
  t.throws(() => loadConfig({ JOURNAL_RETENTION_MAX_AGE_S: '60' }), { constructor: ConfigError, message: /^JOURNAL_RETENTION_MAX_AGE_S=/ })
  t.throws(() => loadConfig({ JOURNAL_RETENTION_MAX_BYTES: '1048576' }), { constructor: ConfigError, message: /^JOURNAL_RETENTION_MAX_BYTES=/ })
  t.throws(() => loadConfig({ JOURNAL_RETENTION_MAX_AGE: '7d' }), { constructor: ConfigError, message: /^unknown variable JOURNAL_RETENTION_MAX_AGE:/ })
})
