/** What the gateway answers a renter, as the SDK reads it (fields the gateway may add later are kept). */

/** One event of a rental, on every channel alike: `event` (its kind) and `event_id` (its resume point), and the kind's fields. */
export interface RentalEvent {
  readonly event: string
  readonly event_id: string
  readonly [field: string]: unknown
}

export interface RentalView {
  readonly rental_id: string
  readonly renter_id: string
  readonly source_id: string
  readonly state: 'scheduled' | 'active' | 'ended' | 'expired'
  readonly starts_at: string
  readonly expires_at: string | null
  readonly ended_at: string | null
  readonly [field: string]: unknown
}

export interface StreamTicket {
  readonly ticket: string
  readonly rental_id: string
  readonly expires_at: string
}

/** The kind of the last event of a rental; nothing follows it on any channel. */
export const RENTAL_ENDED = 'byo.rental.ended'
