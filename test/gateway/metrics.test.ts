import t from 'tap'
import { Metrics } from '../../gateway/metrics.js'

t.test('the minute summary counts the client-error refusals since the last one, and leaves shedding to /metrics', async (t) => {
  const m = new Metrics()
  t.same(m.refusalsSinceLastSummary(), {}, 'nothing yet')
  m.refused('invalid_signature')
  m.refused('invalid_signature')
  m.refused('overloaded')
  m.refused('stale_timestamp')
  t.same(m.refusalsSinceLastSummary(), { invalid_signature: 2, stale_timestamp: 1 })
  m.refused('invalid_signature')
  m.refused('overloaded')
  t.same(m.refusalsSinceLastSummary(), { invalid_signature: 1 }, 'only what came since')
  t.same(m.refusalsSinceLastSummary(), {}, 'a quiet minute has no line')
  const page = m.render({ verifySlotsTaken: 0, liveNonces: 0, dedupEntries: 0, journalLastSeq: 0, inFlightRequests: 0, provenAddresses: 0 })
  t.match(page, /sgw_ingest_refused_total\{code="invalid_signature"\} 3/, 'the counters themselves are not reset')
  t.match(page, /sgw_ingest_refused_total\{code="overloaded"\} 2/)
})
