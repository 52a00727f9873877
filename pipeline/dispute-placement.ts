import type { LogRecord } from './log.js'
import { hasPrefix } from './byte-prefix.js'

/**
 * The log record that gives an accepted dispute its place in the log's order. Accepting
 * a dispute appends one to the signal log, under the dispute's source, and records the
 * dispute with `after_seq` = its seq: renters receive the dispute's events right after
 * it, on every channel and in every process, because each channel meets the record in
 * its own reading of the log and goes no further until it knows whether the dispute was
 * recorded there (registry/dispute-gate.ts). It is not a signal: no receipt, no event,
 * no signal-id, and every reader of signal records passes over it.
 *
 * Its dedup id has three slashes and a signal's (`<source_id>/<signal_id>`) one, and
 * neither ids nor signal ids may contain one, so it never answers for a signal. A retry
 * of the append inside one acceptance reuses the id (stored once); each acceptance
 * attempt has its own, since an earlier attempt's record may have been passed over.
 */
export interface DisputePlacement {
  readonly v: 1
  readonly kind: 'dispute_placed'
  readonly source_id: string
  readonly dispute_id: string
}

/** A placement met in the log: the record's seq and storing time with what it names. */
export interface PlacementMark {
  readonly seq: number
  /** When the log stored it (ms since the epoch): how long to wait for its dispute counts from here. */
  readonly time: number
  readonly sourceId: string
  readonly disputeId: string
}

export const placementDedupId = (sourceId: string, disputeId: string, attempt: string) => `dispute/${sourceId}/${disputeId}/${attempt}`

export const encodePlacement = (sourceId: string, disputeId: string): Uint8Array =>
  Buffer.from(JSON.stringify({ v: 1, kind: 'dispute_placed', source_id: sourceId, dispute_id: disputeId } satisfies DisputePlacement))

/** Every placement starts with these bytes (JSON.stringify keeps the key order) and no signal record does (its second key is source_id). */
const PREFIX = Buffer.from('{"v":1,"kind":"dispute_placed"')

/** Whether a log record's data is a placement: a byte comparison, so readers of signals pay nothing to tell. */
export const isPlacementData = (data: Uint8Array): boolean => hasPrefix(data, PREFIX)

/** The placement a log record is, or undefined when it is not one (a signal, or a placement this release cannot read, which is no signal either). */
export function placementIn(record: LogRecord): PlacementMark | undefined {
  if (!isPlacementData(record.data)) return undefined
  try {
    const p = JSON.parse(Buffer.from(record.data.buffer, record.data.byteOffset, record.data.byteLength).toString('utf8')) as Partial<DisputePlacement>
    if (typeof p.source_id !== 'string' || typeof p.dispute_id !== 'string') return undefined
    return { seq: record.seq, time: record.time, sourceId: p.source_id, disputeId: p.dispute_id }
  } catch {
    return undefined
  }
}
