import type { LogRecord, ReadStart, SignalLog } from './log.js'

/** Records asked for per read when reading on: few reads, and a bounded batch held at once. */
const BATCH_RECORDS = 4096

/**
 * The record at exactly `seq`, or undefined. `read` starts at the first record held from
 * `seq` on, so a record retention removed (or a seq past the end) would otherwise come
 * back as a later one.
 */
export async function readRecord(log: SignalLog, seq: number): Promise<LogRecord | undefined> {
  const [record] = await log.read({ fromSeq: seq }, 1)
  return record?.seq === seq ? record : undefined
}

/**
 * The log's records from `start` to `toSeq` (included; the end of the log by default), in
 * batches of at most BATCH_RECORDS, as the log hands them out: a caller that goes through
 * each batch in a loop pays no await per record. Stops at the first record past `toSeq`.
 */
export async function* readBatches(log: SignalLog, start: ReadStart, toSeq = Number.POSITIVE_INFINITY): AsyncGenerator<LogRecord[]> {
  let from = start
  for (;;) {
    const max = 'fromSeq' in from ? Math.min(BATCH_RECORDS, toSeq - from.fromSeq + 1) : BATCH_RECORDS
    const batch = await log.read(from, max)
    const last = batch[batch.length - 1]
    if (last === undefined) return
    if (last.seq > toSeq) {
      const within = batch.filter((r) => r.seq <= toSeq)
      if (within.length > 0) yield within
      return
    }
    yield batch
    from = { fromSeq: last.seq + 1 }
  }
}
