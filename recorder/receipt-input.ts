import { decodeSignalRecord, isMarkerData, type LogRecord } from '../pipeline/index.js'
import type { ReceiptInput } from '../receipts/index.js'

/** What the recorder does with one log record. */
export type RecordMapping =
  | { readonly kind: 'receipt'; readonly input: ReceiptInput }
  /** The source is not in the registry (see `Recorder`): the agent is unknown. */
  | { readonly kind: 'unknown_source'; readonly sourceId: string; readonly receipt: (agentId: string) => ReceiptInput }
  /** Not a signal record this code can read: it can never become a receipt. */
  | { readonly kind: 'undecodable'; readonly why: string }
  /** A marker in the log (pipeline/marker-record.ts: a dispute's placement, a post of outcomes the outcomes route already stored): no signal, nothing to record. */
  | { readonly kind: 'not_a_signal' }

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$/

const isIso = (v: unknown): v is string => typeof v === 'string' && ISO_UTC.test(v) && Number.isFinite(Date.parse(v))

/**
 * A log record as the receipt the store is handed, its agent from the registry (retired
 * sources included: a source retired after accepting a signal still owns its receipt).
 * Every field the store checks is checked here first, so one malformed record cannot
 * make the store refuse a whole batch.
 */
export function mapRecord(record: LogRecord, agentOf: (sourceId: string) => string | undefined): RecordMapping {
  if (isMarkerData(record.data)) return { kind: 'not_a_signal' }
  let r: Record<string, unknown>
  try {
    r = decodeSignalRecord(record.data) as unknown as Record<string, unknown>
  } catch (err) {
    return { kind: 'undecodable', why: `not JSON (${(err as Error).message})` }
  }
  if (r === null || typeof r !== 'object' || r.v !== 1) return { kind: 'undecodable', why: 'not a version 1 signal record' }
  for (const name of ['source_id', 'signal_id', 'key_id', 'token', 'severity'] as const) {
    if (typeof r[name] !== 'string' || r[name] === '') return { kind: 'undecodable', why: `${name} is not a non-empty string` }
  }
  if (typeof r.test !== 'boolean') return { kind: 'undecodable', why: 'test is not a boolean' }
  if (!isIso(r.emitted_at) || !isIso(r.received_at)) return { kind: 'undecodable', why: 'emitted_at or received_at is not ISO 8601 UTC' }
  if (r.confidence !== null && (typeof r.confidence !== 'number' || !Number.isInteger(r.confidence) || r.confidence < 0 || r.confidence > 100)) {
    return { kind: 'undecodable', why: 'confidence is not null or a whole number from 0 to 100' }
  }
  if (r.note !== null && typeof r.note !== 'string') return { kind: 'undecodable', why: 'note is not null or a string' }
  const sourceId = r.source_id as string
  const receipt = (agentId: string): ReceiptInput => ({
    source_id: sourceId,
    agent_id: agentId,
    signal_id: r.signal_id as string,
    key_id: r.key_id as string,
    token: r.token as string,
    severity: r.severity as string,
    confidence: r.confidence as number | null,
    note: r.note as string | null,
    test: r.test as boolean,
    emitted_at: r.emitted_at as string,
    received_at: r.received_at as string,
  })
  const agentId = agentOf(sourceId)
  return agentId === undefined ? { kind: 'unknown_source', sourceId, receipt } : { kind: 'receipt', input: receipt(agentId) }
}
