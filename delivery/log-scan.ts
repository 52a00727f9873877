import { placementIn, type LogRecord, type PlacementMark, type SignalLog } from '../pipeline/index.js'
import type { RentalRecord } from '../rentals/index.js'
import type { DeliveryEvent } from '../schemas/index.js'
import { DisputeQueue, recordStep, type PlacedEvent, type RentalCursor, type RentalDisputes } from './rental-events.js'

/** Log records read per batch of a scan. */
const SCAN_BATCH = 1024

export interface ScanStart {
  /** Resume after this seq; undefined: from the rental's start. */
  readonly afterSeq?: number
  /** With `afterSeq`: resume after this dispute event placed after it (a dispute event's id), not before the first. */
  readonly dispute?: RentalCursor['dispute']
}

export interface ScanResult {
  readonly events: DeliveryEvent[]
  /** The last log seq looked at (0 when none): the scan resumes after it. */
  readonly scannedTo: number
  /** The point the scan resumes from: after its last event, or the last record it looked at. */
  readonly cursor: RentalCursor
  /** True when the scan reached `toSeq` (or the log's end): nothing is left to read up to there. */
  readonly complete: boolean
  /** Records retention removed between the start asked for and the first one held; null when none. */
  readonly lost: { readonly fromSeq: number; readonly toSeq: number; readonly count: number } | null
  /** Set when the scan stopped before a dispute placement whose dispute is not recorded yet: resume from `cursor` once it is settled. */
  readonly waitingFor?: PlacementMark
}

/**
 * The rental's events from a start up to after record `toSeq`, in the rental's one order
 * (rental-events.ts: records and the accepted disputes placed among them), at most
 * `maxEvents` of them and at most `maxScan` log records read. The journal keeps no index
 * by source, so a scan reads every source's records and keeps the rental's: bounded per
 * call by `maxScan`, and resumable from `cursor`. Without a resume point the scan starts
 * at the first record stored at or after the rental's starts_at (the log stores a signal
 * after it was received, so none of the rental's is earlier). A dispute placement of the
 * rental's source stops the scan until its dispute is settled (`waitingFor`), so that no
 * dispute lands behind a record the scan went past.
 */
export async function scanRentalEvents(
  log: SignalLog,
  rental: () => RentalRecord | undefined,
  start: ScanStart,
  toSeq: number,
  maxEvents: number,
  maxScan: number,
  disputes: RentalDisputes,
): Promise<ScanResult> {
  const events: DeliveryEvent[] = []
  const first = await firstRead(log, rental, start)
  let lost: ScanResult['lost'] = null
  if (start.afterSeq !== undefined) {
    const held = first.records[0]?.seq ?? (await log.info()).firstSeq
    const missing = held - (start.afterSeq + 1)
    if (missing > 0 && held > 0) lost = { fromSeq: start.afterSeq + 1, toSeq: held - 1, count: missing }
  } else if (first.gapBefore !== null) lost = first.gapBefore
  let cursor: RentalCursor = lost !== null ? { seq: lost.toSeq } : start.afterSeq === undefined ? { seq: 0 } : { seq: start.afterSeq, ...(start.dispute && { dispute: start.dispute }) }
  const initial = rental()
  if (initial === undefined) return { events, scannedTo: cursor.seq, cursor, complete: true, lost }
  let queue = new DisputeQueue(disputes, initial, cursor, toSeq)
  const done = (complete: boolean): ScanResult => ({ events, scannedTo: cursor.seq, cursor, complete, lost })
  const take = (placed: PlacedEvent) => {
    events.push(placed.event)
    cursor = placed.cursor
  }
  /** The disputes placed after the last record up to toSeq: the scan is complete once they are out. */
  const finish = (): ScanResult => {
    for (;;) {
      if (events.length >= maxEvents) return done(!queue.has(toSeq))
      const d = queue.through(toSeq)
      if (d === undefined) return done(true)
      take(d)
    }
  }
  let batch = first.records
  let read = 0
  for (;;) {
    for (const record of batch) {
      if (record.seq > toSeq) return finish()
      const current = rental()
      if (current === undefined) return done(true)
      for (;;) {
        if (events.length >= maxEvents) return done(false)
        const d = queue.before(record.seq)
        if (d === undefined) break
        take(d)
      }
      if (events.length >= maxEvents) return done(false)
      const mark = record.sourceId === current.source_id ? placementIn(record) : undefined
      if (mark !== undefined) {
        if (!disputes.disputeGate.settled(mark)) return { ...done(false), waitingFor: mark }
        // The dispute may have been recorded since the queue was made: its events are placed after this record.
        queue = new DisputeQueue(disputes, current, { seq: record.seq }, toSeq)
      }
      const step = recordStep(record, current)
      read++
      cursor = step.cursor
      if (step.event !== undefined) take({ event: step.event, cursor: step.cursor })
      if (events.length >= maxEvents || read >= maxScan) return cursor.seq >= toSeq ? finish() : done(false)
    }
    if (batch.length === 0 || cursor.seq >= toSeq) return finish()
    batch = await log.read({ fromSeq: cursor.seq + 1 }, Math.min(SCAN_BATCH, toSeq - cursor.seq))
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
