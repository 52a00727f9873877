export { ApiError, ERROR_STATUS, ErrorBody, type ErrorCode } from './api-error.js'
export {
  checkCreateAgent,
  checkCreateSource,
  checkCreateToken,
  checkOpenDispute,
  checkRegisterKey,
  checkResolveDispute,
  checkRevokeKey,
  checkUpdateAgent,
  checkUpdateSource,
  ClientId,
  Cursor,
  MAX_SLOTS_PER_AGENT,
  type OpenDisputeRequest,
  REVOCATION_REASONS,
  type RevocationReason,
  SourceId,
} from './control.js'
export { canonicalToken, DeliveryFilter, FILTER_LIMITS, parseDeliveryFilter, passesFilter, type FilteredFields } from './delivery-filter.js'
export { RentalEndedEvent, SignalAcceptedEvent, SignalDisputedEvent, StreamGapEvent, type DeliveryEvent } from './events.js'
export { CHAINS, checkManifest, enforcedMaxRate, Listing, Manifest, PUBLIC_DELAY_DEFAULT_S, PUBLIC_DELAY_MAX_S, PUBLIC_DELAY_MIN_S, publicDelaySeconds, rateCeilingProblem, ratePerMs, type RateCeiling } from './manifest.js'
export { openApiDocument } from './openapi.js'
export { OPENAPI_FILE, OPENAPI_PLACEHOLDER_URL, openApiFileText } from './openapi-file.js'
export { compileCheck, type BodyCheck } from './schema-problem.js'
export { AcceptedBody, isWithinSkew, MAX_SKEW_MS, NONCE_WINDOW_MS, SignalPayloadSchema, signingString } from './signal.js'
export { checkCreateRental, CreateRentalRequest, RENTAL_STATES, RentalView } from './rentals.js'
export { checkOutcomeItem, OUTCOME_REFUSALS, OUTCOMES_BODY_MAX_BYTES, OUTCOMES_PER_POST_MAX, OutcomeItem, OutcomesAnswer, type OutcomeRefusalCode, SCORED_AT_SKEW_MS } from './scoring.js'
