import type { DeliveryFilter } from '../schemas/index.js'

/**
 * A rental: a renter's access to the signals of one source for a span of time. It never
 * makes the renter an owner of the source: nothing here reaches the registry's records.
 */

/**
 * `scheduled`: starts_at is still ahead. `active`: from starts_at until it ends.
 * `ended`: ended by the operator. `expired`: its expires_at passed. The last two are final.
 */
export type RentalState = 'scheduled' | 'active' | 'ended' | 'expired'

export interface RentalRecord {
  rental_id: string
  /** A renter token's subject. */
  renter_id: string
  source_id: string
  /** The source's creator when the rental was made: whose signals it receives. */
  creator_id: string
  /** As stored, or as the times make it now (see `effectiveRental`). */
  state: RentalState
  starts_at: string
  /** Null: until ended. */
  expires_at: string | null
  /** When it stopped receiving: the end request's time, or its expires_at. */
  ended_at: string | null
  end_reason: 'ended' | 'expired' | null
  created_at: string
  /**
   * The renter's delivery filter: which of the source's signals reach the rental on every
   * channel. Absent or null: all of them. Kept in the record so that every process
   * sharing the rentals bucket applies the same filter from the moment it is written.
   */
  filter?: DeliveryFilter | null
}

const FINAL: ReadonlySet<RentalState> = new Set(['ended', 'expired'])

export function isFinal(rental: RentalRecord): boolean {
  return FINAL.has(rental.state)
}

/**
 * The rental as it stands at `now`. Only the final states are written; `scheduled` to
 * `active` happens by time alone, and so does `expired` until the expiry timer has
 * written it: a timer that runs late never shows an expired rental as active.
 */
export function effectiveRental(rental: RentalRecord, now: number): RentalRecord {
  if (isFinal(rental)) return rental
  if (rental.expires_at !== null && now >= Date.parse(rental.expires_at)) {
    return { ...rental, state: 'expired', ended_at: rental.expires_at, end_reason: 'expired' }
  }
  const state = now < Date.parse(rental.starts_at) ? 'scheduled' : 'active'
  return rental.state === state ? rental : { ...rental, state }
}

/** Whether the rental receives what its source accepted at `time` (ms): from starts_at until it ended or expired. */
export function isActive(rental: RentalRecord, time: number): boolean {
  if (time < Date.parse(rental.starts_at)) return false
  if (rental.expires_at !== null && time >= Date.parse(rental.expires_at)) return false
  return !(rental.state === 'ended' && rental.ended_at !== null && time >= Date.parse(rental.ended_at))
}

/** The rental's record as the bucket stores it, or undefined if the bytes are not one. */
export function decodeRental(value: Uint8Array): RentalRecord | undefined {
  let doc: Partial<RentalRecord> | null
  try {
    doc = JSON.parse(Buffer.from(value).toString('utf8')) as Partial<RentalRecord> | null
  } catch {
    return undefined
  }
  if (doc === null || typeof doc !== 'object') return undefined
  const strings = [doc.rental_id, doc.renter_id, doc.source_id, doc.creator_id, doc.state, doc.starts_at, doc.created_at]
  if (!strings.every((s) => typeof s === 'string') || Number.isNaN(Date.parse(doc.starts_at as string))) return undefined
  return doc as RentalRecord
}

export function encodeRental(rental: RentalRecord): Uint8Array {
  return Buffer.from(JSON.stringify(rental))
}
