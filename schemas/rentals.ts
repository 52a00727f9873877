import Type from 'typebox'
import { DeliveryFilter } from './delivery-filter.js'
import { ClientId } from './control.js'
import { compileCheck } from './schema-problem.js'

/** An ISO 8601 UTC time as the gateway writes and reads them (parseIsoUtc says which forms). */
const IsoTime = Type.String({ minLength: 20, maxLength: 40, description: 'ISO 8601 UTC, such as 2030-01-31T12:00:00Z' })

export const CreateRentalRequest = Type.Object(
  {
    renter_id: Type.Unsafe<string>({ ...ClientId, description: 'the renter: the subject of its renter token' }),
    source_id: Type.String({ minLength: 1, maxLength: 128, description: 'an existing source' }),
    starts_at: Type.Optional(Type.Unsafe<string>({ ...IsoTime, description: 'when the rental starts; default now; not more than 5 minutes in the past' })),
    expires_at: Type.Optional(Type.Union([IsoTime, Type.Null()], { description: 'when the rental expires by itself, after starts_at and in the future; absent or null: until ended' })),
  },
  { additionalProperties: false },
)
export type CreateRentalRequest = Type.Static<typeof CreateRentalRequest>

export const checkCreateRental = compileCheck<CreateRentalRequest>(CreateRentalRequest, 'body')

export const RENTAL_STATES = ['scheduled', 'active', 'ended', 'expired'] as const

/** A rental as the API shows it, its state as it stands at the time of the answer. */
export const RentalView = Type.Object(
  {
    rental_id: Type.String(),
    renter_id: Type.String(),
    source_id: Type.String(),
    creator_id: Type.String({ description: 'the source creator' }),
    state: Type.Union(RENTAL_STATES.map((s) => Type.Literal(s))),
    starts_at: Type.String(),
    expires_at: Type.Union([Type.String(), Type.Null()]),
    ended_at: Type.Union([Type.String(), Type.Null()], { description: 'the end request time, or expires_at once expired' }),
    end_reason: Type.Union([Type.Literal('ended'), Type.Literal('expired'), Type.Null()]),
    created_at: Type.String(),
    filter: Type.Optional(Type.Union([DeliveryFilter, Type.Null()], { description: "the renter's delivery filter (PUT /v1/rentals/{rental_id}/filter); absent or null: none" })),
  },
  { additionalProperties: false },
)
