import Type from 'typebox'

/**
 * Every wire error code, with the HTTP status it travels with. The 400/401/409/429
 * codes are the ingest endpoint's published ones; the rest belong to the control plane
 * and the edge. Codes are stable: clients match on them.
 */
export const ERROR_STATUS = {
  // ingest, 400: the body or one of its fields failed validation
  invalid_source_id: 400,
  invalid_signal_id: 400,
  invalid_timestamp: 400,
  invalid_token: 400,
  invalid_severity: 400,
  invalid_confidence: 400,
  invalid_note: 400,
  invalid_body: 400,
  // ingest, 401: authentication failed
  missing_signature: 401,
  unknown_key: 401,
  revoked_key: 401,
  invalid_signature: 401,
  stale_timestamp: 401,
  replayed_nonce: 401,
  // 409 and 429
  idempotency_conflict: 409,
  rate_limited: 429,
  // control plane
  invalid_request: 400,
  invalid_manifest: 400,
  invalid_public_key: 400,
  invalid_webhook_url: 400,
  invalid_filter: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  no_open_slot: 409,
  key_not_tested: 409,
  invalid_key_state: 409,
  key_exists: 409,
  already_exists: 409,
  limit_exceeded: 409,
  key_not_revoked: 409,
  invalid_dispute_state: 409,
  slots_in_use: 409,
  source_retired: 409,
  rental_not_active: 409,
  /** A receipt whose leaf is not in a signed checkpoint of the receipt log yet: retry in a second. */
  not_yet_logged: 409,
  unknown_signal: 400,
  payload_too_large: 413,
  /** A path another role serves (ROLE): the request reached the wrong process. */
  wrong_role: 421,
  // edge
  overloaded: 503,
  not_ready: 503,
  receipts_unavailable: 503,
  internal_error: 500,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS

/** One error base for the HTTP boundary: a stable code, its status, a message. */
export class ApiError extends Error {
  readonly code: ErrorCode
  readonly status: number
  /** Seconds, sent as `Retry-After` on 429 and 503. */
  readonly retryAfter: number | undefined
  /** The methods a 405's path does take, sent as `Allow` (RFC 9110 section 15.5.6). */
  readonly allow: string | undefined

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; retryAfter?: number; allow?: string }) {
    // A refusal is an answer, not a fault: no stack trace. Capturing one cost more than
    // the rest of a shed request under overload (tens of thousands per second).
    const limit = Error.stackTraceLimit
    Error.stackTraceLimit = code === 'internal_error' ? limit : 0
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    Error.stackTraceLimit = limit
    this.name = 'ApiError'
    this.code = code
    this.status = ERROR_STATUS[code]
    this.retryAfter = options?.retryAfter
    this.allow = options?.allow
  }
}

/** The body of every error answer. */
export const ErrorBody = Type.Object(
  {
    ok: Type.Literal(false),
    error: Type.Object(
      {
        code: Type.String(),
        message: Type.String(),
        request_id: Type.String(),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)
export type ErrorBody = Type.Static<typeof ErrorBody>
