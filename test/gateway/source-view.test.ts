import t from 'tap'
import { sourceView } from '../../gateway/control/source-routes.js'
import type { SourceRecord } from '../../registry/index.js'
import { MANIFEST } from '../helpers/api.js'

// The flag is set only after minutes of sustained over-rate (pipeline tests, with a
// clock); here, that the status shows it once set.
t.test('a source flagged for review shows it in its status, with the time', async (t) => {
  const record: SourceRecord = {
    source_id: 'src_a',
    agent_id: 'a1',
    creator_id: 'c1',
    manifest: MANIFEST as SourceRecord['manifest'],
    listing: { public_receipts: false },
    created_at: '2026-01-01T00:00:00.000Z',
    flagged_for_review_at: null,
    updated_at: null,
    retired_at: null,
  }
  t.match(sourceView(record, 'http://x'), { flagged_for_review: false, flagged_for_review_at: null })
  const flagged = { ...record, flagged_for_review_at: '2026-01-01T00:10:00.000Z' }
  t.match(sourceView(flagged, 'http://x'), { flagged_for_review: true, flagged_for_review_at: '2026-01-01T00:10:00.000Z', ingest_endpoint: 'http://x/v1/byo/sources/src_a/signals' })
})
