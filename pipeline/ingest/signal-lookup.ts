import type { ReadStart, SignalLog } from '../log.js'
import { decodeSignalRecord, signalDedupId, type SignalRecord } from './signal-record.js'

/** How far before its `received_at` a record is looked for: the clock may have stepped back that much. */
const CLOCK_STEP_MS = 1000
/**
 * Records read at most by the look-ups of one request, all its signals together: about
 * 170 ms of reading 700-byte records here, so that wrong times cannot make a request
 * read the log for long. Found by their received_at, signals usually sit a few hundred
 * records after it (the records stored during their own few milliseconds in flight).
 */
export const LOOKUP_MAX_RECORDS = 65_536
const BATCH = 1024

export type SignalLookup =
  | { readonly found: true; readonly seq: number; readonly record: SignalRecord }
  /** `absent`: not in the log near that time; `too_far`: the budget of records ran out first. */
  | { readonly found: false; readonly reason: 'absent' | 'too_far' }

/**
 * Finds an accepted signal in the log by the `received_at` its 202 answered with. The
 * log is ordered by the time it stored each record, which is after the arrival by at
 * most `maxLagMs` (the body, the verification, the append), so the record is among the
 * few stored from that time on. Compares the dedup ids only and decodes the one record
 * that matches. Reads at most `budget.records` records and takes them off it.
 */
export async function findSignal(
  log: SignalLog,
  sourceId: string,
  signalId: string,
  receivedAtMs: number,
  maxLagMs: number,
  budget: { records: number } = { records: LOOKUP_MAX_RECORDS },
): Promise<SignalLookup> {
  const dedupId = signalDedupId(sourceId, signalId)
  let start: ReadStart = { fromTime: Math.max(0, receivedAtMs - CLOCK_STEP_MS) }
  while (budget.records > 0) {
    const batch = await log.read(start, Math.min(BATCH, budget.records))
    budget.records -= batch.length
    for (const r of batch) {
      if (r.time > receivedAtMs + maxLagMs) return { found: false, reason: 'absent' }
      // A dispute placement's dedup id never equals a signal's (dispute-placement.ts).
      if (r.dedupId === dedupId) return { found: true, seq: r.seq, record: decodeSignalRecord(r.data) }
    }
    const last = batch[batch.length - 1]
    if (last === undefined) return { found: false, reason: 'absent' }
    start = { fromSeq: last.seq + 1 }
  }
  return { found: false, reason: 'too_far' }
}
