/**
 * Event ids: positions along the signal log, so the same in every process and ordered as
 * the log is. A signal's event id is its log sequence in decimal; an event that is not a
 * log record (a dispute, the rental's end) carries the sequence it follows and a suffix,
 * so resuming from it resumes after that sequence.
 */

const EVENT_ID = /^([0-9]{1,15})(?:\.(end|d[0-9]{1,15}))?$/

export interface EventPosition {
  /** Every signal event with a greater seq comes after this point. */
  readonly seq: number
  /** The point is the rental's end: nothing follows it. */
  readonly end: boolean
}

export const signalEventId = (seq: number): string => String(seq)
export const endedEventId = (seq: number): string => `${seq}.end`
export const disputedEventId = (afterSeq: number, signalSeq: number): string => `${afterSeq}.d${signalSeq}`

/** The position an event id names, or undefined when the text is not one. */
export function parseEventId(text: string): EventPosition | undefined {
  const m = EVENT_ID.exec(text)
  if (m === null) return undefined
  const seq = Number(m[1])
  if (!Number.isSafeInteger(seq)) return undefined
  return { seq, end: m[2] === 'end' }
}
