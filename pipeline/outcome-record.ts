import { randomUUID } from 'node:crypto'
import type { LogRecord, SignalLog } from './log.js'
import { hasPrefix } from './byte-prefix.js'

/**
 * The log record that gives a scorer's post of outcomes its place in the log's order, so
 * that the receipt log (receipt-log/sequencer.ts) logs each verdict that changes a receipt
 * where the record is, the same on every run. The outcomes route appends one per post,
 * after the receipt store took the post and before answering, naming the items the store
 * accepted. It is not a signal: no receipt, no event, no signal-id, and every reader of
 * signal records passes over it; the recorder does not apply it (the route already
 * stored the post).
 *
 * Its dedup id has two slashes, a signal's (`<source_id>/<signal_id>`) one and a dispute
 * placement's three, and neither ids nor signal ids may contain one, so it never answers
 * for either. The record names no source: a post scores receipts of many.
 *
 * Size: an item is at most about 260 bytes of JSON (a receipt id, three ISO times, a
 * finite number and a word), so a post of 1,000 stays far under the log's 1 MiB record.
 */
export interface OutcomeItem {
  readonly receipt_id: string
  /** ISO 8601 UTC with milliseconds, as the receipt store keeps it. */
  readonly window_start: string
  readonly window_end: string
  readonly baseline: number
  readonly outcome: 'hit' | 'miss' | 'void'
  readonly scored_at: string
}

export interface OutcomesPosted {
  readonly v: 1
  readonly kind: 'outcomes_posted'
  readonly items: readonly OutcomeItem[]
}

export const outcomesDedupId = (postId: string) => `outcomes/post/${postId}`

export const encodeOutcomes = (items: readonly OutcomeItem[]): Uint8Array =>
  Buffer.from(JSON.stringify({ v: 1, kind: 'outcomes_posted', items } satisfies OutcomesPosted))

/**
 * Appends one post's items; resolves once the record is durable like a signal's. Each call
 * has its own dedup id: an append that failed may have been stored anyway, and the post
 * made again then adds a second record, which changes no receipt the first did not.
 */
export async function appendOutcomes(log: SignalLog, items: readonly OutcomeItem[]): Promise<number> {
  return (await log.append(outcomesDedupId(randomUUID()), encodeOutcomes(items))).seq
}

/** Every outcome record starts with these bytes (JSON.stringify keeps the key order) and no signal record does (its second key is source_id). */
const PREFIX = Buffer.from('{"v":1,"kind":"outcomes_posted"')

/** Whether a log record's data is an outcome record: a byte comparison, so readers of signals pay nothing to tell. */
export const isOutcomeData = (data: Uint8Array): boolean => hasPrefix(data, PREFIX)

const OUTCOMES = new Set(['hit', 'miss', 'void'])
const isItem = (i: Partial<OutcomeItem> | null): i is OutcomeItem =>
  i !== null &&
  typeof i === 'object' &&
  typeof i.receipt_id === 'string' &&
  typeof i.window_start === 'string' &&
  typeof i.window_end === 'string' &&
  typeof i.scored_at === 'string' &&
  typeof i.baseline === 'number' &&
  Number.isFinite(i.baseline) &&
  typeof i.outcome === 'string' &&
  OUTCOMES.has(i.outcome)

/**
 * The items of an outcome record, or undefined when the record is not one. An outcome record
 * this release cannot read yields no item (it is no signal either): its verdicts are stored,
 * but not logged.
 */
export function outcomesIn(record: LogRecord): readonly OutcomeItem[] | undefined {
  if (!isOutcomeData(record.data)) return undefined
  try {
    const p = JSON.parse(Buffer.from(record.data.buffer, record.data.byteOffset, record.data.byteLength).toString('utf8')) as Partial<OutcomesPosted>
    return Array.isArray(p.items) ? p.items.filter(isItem) : []
  } catch {
    return []
  }
}
