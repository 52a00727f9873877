import type { SignalLog } from '../pipeline/index.js'
import { isFinal, type RentalRecord } from '../rentals/index.js'
import { disputeEventsOf, type RentalDisputes } from './rental-events.js'
import { rentalEventOf } from './signal-event.js'

/** Log records read per step of the backward search. */
const READ_BATCH = 1024
/** Ended rentals whose last event this process remembers (a final rental's never changes). */
const REMEMBERED = 10_000
const remembered = new Map<string, number>()

/**
 * The seq of the rental's last event: its last `byo.signal.accepted` (the record's seq)
 * or `byo.signal.disputed` (the record it is placed after), 0 when it has none. Its
 * `byo.rental.ended` carries `<this>.end`, so every channel and every process, whenever it
 * asks, names the end the same way (the log's position at that moment would not).
 *
 * Call it for an ended rental whose end has settled, with `throughSeq` at or past the
 * settled point, so that no event of the rental lies beyond. `known`: the seq of the last
 * event a caller met reading forward to `throughSeq`, which saves the search; without it
 * the log is read backward from `throughSeq` to the rental's start (once per rental: the
 * answer is remembered). A record that retention removed is not looked at.
 */
export async function lastEventSeq(log: SignalLog, rental: RentalRecord, disputes: RentalDisputes, throughSeq: number, known?: number): Promise<number> {
  const held = remembered.get(rental.rental_id)
  if (held !== undefined) return held
  const placed = disputeEventsOf(disputes, rental, { seq: 0 }, throughSeq).at(-1)?.cursor.seq ?? 0
  const seq = Math.max(placed, known ?? (await lastSignalSeq(log, rental, throughSeq, placed)))
  if (isFinal(rental)) {
    if (remembered.size >= REMEMBERED) remembered.delete(remembered.keys().next().value as string)
    remembered.set(rental.rental_id, seq)
  }
  return seq
}

/** The seq of the rental's last signal event at or before `throughSeq` and after `floor`; 0 when none. */
async function lastSignalSeq(log: SignalLog, rental: RentalRecord, throughSeq: number, floor: number): Promise<number> {
  const [first] = await log.read({ fromTime: Date.parse(rental.starts_at) }, 1)
  if (first === undefined) return 0
  const lowest = Math.max(first.seq, floor + 1)
  for (let to = throughSeq; to >= lowest; to -= READ_BATCH) {
    const from = Math.max(lowest, to - READ_BATCH + 1)
    const records = await log.read({ fromSeq: from }, to - from + 1)
    for (let i = records.length - 1; i >= 0; i--) {
      const r = records[i]
      if (r !== undefined && r.seq <= to && rentalEventOf(r, rental) !== undefined) return r.seq
    }
  }
  return 0
}
