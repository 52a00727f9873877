import type { LogRecord, SignalLog } from '../pipeline/index.js'
import type { RentalRecord } from '../rentals/index.js'
import type { SignalAcceptedEvent } from '../schemas/index.js'
import { rentalEventOf } from './signal-event.js'

/** Log records read per batch of a scan. */
const SCAN_BATCH = 1024

export interface ScanStart {
  /** Resume after this seq; undefined: from the rental's start. */
  readonly afterSeq?: number
}

export interface ScanResult {
  readonly events: SignalAcceptedEvent[]
  /** The last log seq looked at (0 when none): the scan resumes after it. */
  readonly scannedTo: number
  /** True when the scan reached `toSeq` (or the log's end): nothing is left to read up to there. */
  readonly complete: boolean
  /** Records retention removed between the start asked for and the first one held; null when none. */
  readonly lost: { readonly fromSeq: number; readonly toSeq: number; readonly count: number } | null
}

/**
 * The rental's signal events from a start up to `toSeq`, at most `maxEvents` of them and
 * at most `maxScan` log records read. The journal keeps no index by source, so a scan
 * reads every source's records and keeps the rental's: bounded per call by `maxScan`,
 * and resumable from `scannedTo`. Without a resume point the scan starts at the first
 * record stored at or after the rental's starts_at (the log stores a signal after it was
 * received, so none of the rental's is earlier).
 */
export async function scanRentalEvents(log: SignalLog, rental: () => RentalRecord | undefined, start: ScanStart, toSeq: number, maxEvents: number, maxScan: number): Promise<ScanResult> {
  const events: SignalAcceptedEvent[] = []
  const first = await firstRead(log, rental, start)
  let lost: ScanResult['lost'] = null
  let scannedTo = start.afterSeq ?? 0
  let batch = first.records
  if (start.afterSeq !== undefined) {
    const held = batch[0]?.seq ?? (await log.info()).firstSeq
    const missing = held - (start.afterSeq + 1)
    if (missing > 0 && held > 0) lost = { fromSeq: start.afterSeq + 1, toSeq: held - 1, count: missing }
  } else if (first.gapBefore !== null) lost = first.gapBefore
  let read = 0
  for (;;) {
    for (const record of batch) {
      if (record.seq > toSeq) return { events, scannedTo, complete: true, lost }
      const current = rental()
      if (current === undefined) return { events, scannedTo, complete: true, lost }
      const event = rentalEventOf(record, current)
      scannedTo = record.seq
      read++
      if (event !== undefined) events.push(event)
      if (events.length >= maxEvents || read >= maxScan) return { events, scannedTo, complete: scannedTo >= toSeq, lost }
    }
    if (batch.length === 0 || scannedTo >= toSeq) return { events, scannedTo, complete: true, lost }
    batch = await log.read({ fromSeq: scannedTo + 1 }, Math.min(SCAN_BATCH, toSeq - scannedTo))
  }
}

async function firstRead(log: SignalLog, rental: () => RentalRecord | undefined, start: ScanStart): Promise<{ records: LogRecord[]; gapBefore: ScanResult['lost'] }> {
  if (start.afterSeq !== undefined) return { records: await log.read({ fromSeq: start.afterSeq + 1 }, SCAN_BATCH), gapBefore: null }
  const current = rental()
  if (current === undefined) return { records: [], gapBefore: null }
  const startsAt = Date.parse(current.starts_at)
  const records = await log.read({ fromTime: startsAt }, SCAN_BATCH)
  // The first record held is younger than the rental: what retention removed before it may have been the rental's.
  const first = records[0]
  if (first !== undefined && first.seq > 1 && first.time > startsAt) {
    const [before] = await log.read({ fromSeq: 1 }, 1)
    if (before !== undefined && before.seq === first.seq) return { records, gapBefore: { fromSeq: 1, toSeq: first.seq - 1, count: first.seq - 1 } }
  }
  return { records, gapBefore: null }
}
