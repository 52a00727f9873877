/**
 * Event ids: positions along the signal log, so the same in every process and ordered as
 * the log is. A signal's event id is its log sequence in decimal; an event that is not a
 * log record carries the sequence it follows and a suffix: `<seq>.end` for the rental's
 * end (nothing follows it), `<after_seq>.d<signal seq>` for a dispute's event about one
 * signal, which comes after record `after_seq` and before the next (disputes at the same
 * after_seq in the order they were accepted, each one's signals by seq).
 */

const EVENT_ID = /^([0-9]{1,15})(?:\.(end|d[0-9]{1,15}))?$/

export interface EventPosition {
  /** Every signal event with a greater seq comes after this point. */
  readonly seq: number
  /** The point is the rental's end: nothing follows it. */
  readonly end: boolean
  /** The point is the dispute event about the signal of this seq, placed after record `seq`: what comes after it at `seq` still follows. */
  readonly disputedSeq?: number
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
  if (m[2] === undefined || m[2] === 'end') return { seq, end: m[2] === 'end' }
  const disputedSeq = Number(m[2].slice(1))
  return { seq, end: false, disputedSeq }
}
