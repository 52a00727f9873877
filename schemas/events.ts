import Type from 'typebox'

/**
 * The position of an event along the signal log, valid in every gateway process: the
 * resume point of a stream (`Last-Event-ID`) and the cursor of polling. A signal's is its
 * log sequence in decimal (`"1042"`); an event that is not a log record carries the
 * position it follows with a suffix (`"1042.end"`, `"1042.d977"`). Clients treat it as opaque.
 */
const EventId = Type.String({ pattern: '^[0-9]{1,15}(\\.(end|d[0-9]{1,15}))?$' })

/** Emitted for a rental when a signal of the rented source is accepted. */
export const SignalAcceptedEvent = Type.Object(
  {
    event: Type.Literal('byo.signal.accepted'),
    event_id: EventId,
    rental_id: Type.String(),
    source_id: Type.String(),
    signal_id: Type.String(),
    token: Type.String(),
    severity: Type.String({ description: 'a declared severity level' }),
    emitted_at: Type.String({ description: 'ISO 8601 UTC, the payload ts' }),
    received_at: Type.String({ description: 'ISO 8601 UTC arrival time' }),
    receipt_id: Type.String({ pattern: '^rc_[0-9a-f]{32}$', description: "the signal's receipt (GET /v1/byo/receipts/{receipt_id}), the same for every delivery of it" }),
    confidence: Type.Union([Type.Integer({ minimum: 0, maximum: 100 }), Type.Null()], { description: "the creator's confidence, 0 to 100; null when the signal gave none" }),
    note: Type.Union([Type.String({ maxLength: 280 }), Type.Null()], { description: "the creator's note; null when the signal gave none" }),
  },
  { additionalProperties: false },
)
export type SignalAcceptedEvent = Type.Static<typeof SignalAcceptedEvent>

/** An accepted dispute names a signal this rental received: the signal was sent under a leaked key. */
export const SignalDisputedEvent = Type.Object(
  {
    event: Type.Literal('byo.signal.disputed'),
    event_id: EventId,
    rental_id: Type.String(),
    source_id: Type.String(),
    signal_id: Type.String(),
    /** The event_id of the signal's byo.signal.accepted event. */
    signal_event_id: EventId,
    dispute_id: Type.String(),
    disputed_at: Type.String({ description: 'ISO 8601 UTC, when the dispute was accepted' }),
  },
  { additionalProperties: false },
)
export type SignalDisputedEvent = Type.Static<typeof SignalDisputedEvent>

/** The last event of a rental: nothing follows it. */
export const RentalEndedEvent = Type.Object(
  {
    event: Type.Literal('byo.rental.ended'),
    event_id: EventId,
    rental_id: Type.String(),
    source_id: Type.String(),
    state: Type.Union([Type.Literal('ended'), Type.Literal('expired')]),
    ended_at: Type.String({ description: 'ISO 8601 UTC: signals received from then on are not the rental\'s' }),
  },
  { additionalProperties: false },
)
export type RentalEndedEvent = Type.Static<typeof RentalEndedEvent>

/**
 * Streams and polling: the log no longer holds part of what the resume point asked for. Events
 * after `from_event_id` up to `to_event_id` (included) may have been lost; the receipts
 * API still lists the signals.
 */
export const StreamGapEvent = Type.Object(
  {
    event: Type.Literal('byo.stream.gap'),
    event_id: EventId,
    rental_id: Type.String(),
    from_event_id: Type.String(),
    to_event_id: Type.String(),
    /** Log records removed in the range, of every source: how many were this rental's cannot be known. */
    count: Type.Integer(),
  },
  { additionalProperties: false },
)
export type StreamGapEvent = Type.Static<typeof StreamGapEvent>

export type DeliveryEvent = SignalAcceptedEvent | SignalDisputedEvent | RentalEndedEvent | StreamGapEvent
