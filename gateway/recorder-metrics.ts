import { Counter, type Registry } from 'prom-client'
import type { RecorderCounts, RecorderStatus } from '../recorder/index.js'
import { scrapedMetrics } from './scraped-metrics.js'

/** What the gateway reads of the recorder, at scrape time and for /readyz. */
export interface RecorderReadings {
  status(): RecorderStatus
  counts(): RecorderCounts
}

/**
 * The recorder's metrics, read from its own running numbers when scraped (prom-client's
 * `collect`): nothing on the recording path calls prom-client.
 */
export function registerRecorderMetrics(registry: Registry, recorder: RecorderReadings): void {
  const registers = [registry]
  const { gauge, counter } = scrapedMetrics(registry)
  gauge('sgw_recorder_lag_records', 'Signal log records not yet recorded as receipts: the log\'s last seq less the recorder\'s acknowledged position.', () => recorder.status().lag_records)
  gauge('sgw_recorder_lag_seconds', 'Age of the oldest signal not yet recorded as a receipt, in seconds; 0 when caught up.', () => recorder.status().lag_seconds)
  gauge('sgw_recorder_retrying', '1 while the recorder retries a failed write to the receipt store (see /readyz for the error), else 0.', () => (recorder.status().state === 'retrying' ? 1 : 0))
  gauge('sgw_recorder_disputes_pending', 'Disputes whose current state is not yet on the receipts they name.', () => recorder.status().disputes_pending)
  counter('sgw_receipts_recorded_total', 'Receipts written by the recorder.', () => recorder.counts().recorded)
  counter('sgw_recorder_already_recorded_total', 'Records handed to the recorder whose receipt already existed (a redelivery after a failure or a crash, or a signal_id accepted again): nothing written.', () => recorder.counts().alreadyRecorded)
  new Counter({
    name: 'sgw_recorder_batches_total',
    help: 'Recorder batches: written and acknowledged (result="ok"), or failed and retried (result="retry").',
    labelNames: ['result'],
    registers,
    collect(this: Counter<'result'>) {
      const c = recorder.counts()
      this.reset()
      this.inc({ result: 'ok' }, c.batchesOk)
      this.inc({ result: 'retry' }, c.batchesRetried)
    },
  })
  counter('sgw_recorder_lost_records_total', 'Signal log records retention removed before the recorder read them: they have no receipt (each range is logged).', () => recorder.counts().lostRecords)
  counter('sgw_recorder_undecodable_records_total', 'Signal log records that are not signal records this release can read: skipped, each logged.', () => recorder.counts().undecodableRecords)
  counter('sgw_recorder_unknown_source_records_total', 'Receipts recorded with an empty agent_id because the registry does not know their source.', () => recorder.counts().unknownSourceRecords)
}
