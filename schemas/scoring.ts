import Type from 'typebox'
import { compileCheck } from './schema-problem.js'

/** Items in one post of outcomes: the most a scorer sends at once. */
export const OUTCOMES_PER_POST_MAX = 1000

/**
 * The body of a post of outcomes: 1,000 items of about 200 bytes are 200 kB; a megabyte
 * leaves room for whitespace and long numbers while staying a bounded share of the
 * control plane's body budget (a quarter of it).
 */
export const OUTCOMES_BODY_MAX_BYTES = 1024 * 1024

/** How far in the gateway's future a scored_at may lie: the clock skew the gateway allows signers. */
export const SCORED_AT_SKEW_MS = 300_000

const IsoTime = (description: string) => Type.String({ minLength: 20, maxLength: 40, description: `ISO 8601 UTC, such as 2030-01-31T12:00:00.000Z: ${description}` })

/**
 * One item of a post: the scoring service's verdict on one receipt. Closed: an unknown
 * field is refused (that item only), so a misspelt field is never silently dropped.
 */
export const OutcomeItem = Type.Object(
  {
    receipt_id: Type.String({ minLength: 1, maxLength: 64, description: 'a receipt id: rc_ and 32 lowercase hex digits' }),
    window_start: IsoTime('start of the scoring window'),
    window_end: IsoTime('end of the scoring window, not before window_start'),
    baseline: Type.Number({ description: 'the baseline the outcome was measured against (a finite number)' }),
    outcome: Type.Union([Type.Literal('hit'), Type.Literal('miss'), Type.Literal('void')]),
    scored_at: IsoTime('when it was scored: of two verdicts on one receipt the newer wins; at most 5 minutes in the future'),
  },
  { additionalProperties: false },
)
export type OutcomeItem = Type.Static<typeof OutcomeItem>

export const checkOutcomeItem = compileCheck<OutcomeItem>(OutcomeItem, 'item')

/** Why one item of a post was refused; the rest of the post is unaffected. */
export const OUTCOME_REFUSALS = ['invalid_item', 'duplicate_item', 'unknown_receipt'] as const
export type OutcomeRefusalCode = (typeof OUTCOME_REFUSALS)[number]

/** The answer's `data`. */
export const OutcomesAnswer = Type.Object(
  {
    accepted: Type.Integer({ minimum: 0, description: 'items stored; an item older than the stored verdict is stored too, and loses' }),
    refused: Type.Array(
      Type.Object(
        {
          index: Type.Integer({ minimum: 0, description: 'position of the item in the post, from 0' }),
          receipt_id: Type.Union([Type.String(), Type.Null()], { description: 'as the item gave it; null when it gave none (or not a string)' }),
          code: Type.Union(OUTCOME_REFUSALS.map((c) => Type.Literal(c))),
          message: Type.String(),
        },
        { additionalProperties: false },
      ),
      { description: 'every refused item, in post order' },
    ),
  },
  { additionalProperties: false },
)
