/**
 * The SDK's errors, each with a stable `code` to match on (never the message text).
 * `PushError` and `CreatorApiError` carry the gateway's own error code as `errorCode`.
 */

/** Base of every error the SDK throws on purpose. */
export class GatewaySdkError extends Error {
  readonly code: string
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = code
  }
}

/** A private key the SDK cannot load: not PEM PKCS#8 Ed25519, not a 32-byte seed. */
export class KeyFormatError extends GatewaySdkError {
  constructor(message: string) {
    super('invalid_key', message)
  }
}

/** What a push ended with when it did not end with a 202. */
export type PushFailure =
  /** The gateway answered a status that a retry cannot change (400, 401, 403, 404, 409, 413, ...). */
  | 'push_refused'
  /** The deadline passed (or the next wait would pass it) while the answers were retryable. */
  | 'push_deadline_exceeded'
  /** The caller's AbortSignal fired. */
  | 'push_aborted'

export interface PushErrorDetails {
  /** The last HTTP status, if any answer came. */
  readonly status: number | undefined
  /** The gateway's error code from the last answer (`rate_limited`, `invalid_signature`, ...). */
  readonly errorCode: string | undefined
  /** The gateway's message from the last answer. */
  readonly errorMessage: string | undefined
  /** The gateway's request id from the last answer, for the ingest-error list and support. */
  readonly requestId: string | undefined
  /** Requests sent, the last one included. */
  readonly attempts: number
  /** From the first send to giving up. */
  readonly elapsedMs: number
}

/** A push that ended without a 202; `cause` is the last network error, if the last attempt had one. */
export class PushError extends GatewaySdkError implements PushErrorDetails {
  declare readonly code: PushFailure
  readonly status: number | undefined
  readonly errorCode: string | undefined
  readonly errorMessage: string | undefined
  readonly requestId: string | undefined
  readonly attempts: number
  readonly elapsedMs: number

  constructor(code: PushFailure, details: PushErrorDetails, cause?: unknown) {
    super(code, pushMessage(code, details, cause), { cause })
    this.status = details.status
    this.errorCode = details.errorCode
    this.errorMessage = details.errorMessage
    this.requestId = details.requestId
    this.attempts = details.attempts
    this.elapsedMs = details.elapsedMs
  }
}

function pushMessage(code: PushFailure, d: PushErrorDetails, cause: unknown): string {
  const why =
    code === 'push_refused' ? 'refused' : code === 'push_aborted' ? 'aborted' : `gave up at the deadline`
  const last =
    d.status !== undefined
      ? `${d.status}${d.errorCode === undefined ? '' : ` ${d.errorCode}`}${d.errorMessage === undefined ? '' : `: ${d.errorMessage}`}`
      : cause instanceof Error
        ? `network error: ${cause.message}`
        : 'no answer'
  return `push ${why} after ${d.attempts} attempt${d.attempts === 1 ? '' : 's'} in ${(d.elapsedMs / 1000).toFixed(1)} s; last: ${last}`
}

/**
 * A control-plane call answered with an error: `status`, the gateway's `errorCode` and
 * `requestId`, and a message naming the step. `code` says whose client made the call.
 */
export class GatewayApiError extends GatewaySdkError {
  readonly status: number
  readonly errorCode: string | undefined
  readonly requestId: string | undefined

  constructor(code: string, step: string, status: number, body: unknown) {
    const error = errorOf(body)
    super(code, `${step}: ${status}${error.code === undefined ? '' : ` ${error.code}`}${error.message === undefined ? '' : `: ${error.message}`}`)
    this.status = status
    this.errorCode = error.code
    this.requestId = error.requestId
  }
}

/** A creator's control-plane call (onboarding, keys, ingest errors) answered with an error. */
export class CreatorApiError extends GatewayApiError {
  constructor(step: string, status: number, body: unknown) {
    super('creator_api_error', step, status, body)
  }
}

/** A renter's control-plane call (rentals, webhooks, tickets, polling) answered with an error. */
export class RenterApiError extends GatewayApiError {
  constructor(step: string, status: number, body: unknown) {
    super('renter_api_error', step, status, body)
  }
}

/** The `error` of a gateway error body (`{"ok":false,"error":{code,message,request_id}}`), leniently. */
export function errorOf(body: unknown): { code: string | undefined; message: string | undefined; requestId: string | undefined } {
  const error = typeof body === 'object' && body !== null ? (body as { error?: unknown }).error : undefined
  const field = (name: string) => {
    const value = typeof error === 'object' && error !== null ? (error as Record<string, unknown>)[name] : undefined
    return typeof value === 'string' ? value : undefined
  }
  return { code: field('code'), message: field('message'), requestId: field('request_id') }
}
