/**
 * NATS failures turned into the log's typed errors at the adapter edge, so nothing above
 * it looks at a NATS error class or message. Decided by error class and JetStream API
 * code, never by text.
 *
 * Transient (`unavailable`, retry): the request timed out (server down, a reconnect under
 * way, a leader election), nobody answered (no responders: the stream has no leader yet),
 * the connection is closing or reconnecting, and JetStream answered 503 (not enabled, or
 * no quorum during an election). A timed-out append is ambiguous: the server may have
 * stored it. Retrying it with the same dedup id is safe while the id is in the window.
 * Everything else is `log_io`: the server refused the call as made.
 */
import { errors as coreErrors } from '@nats-io/transport-node'
import { JetStreamApiError, JetStreamError } from '@nats-io/jetstream'
import { jserrors } from '@nats-io/jetstream/internal'
import { LogError } from '../log-error.js'

/** JetStream API error codes (`err_code`) the adapter branches on. */
export const API_CODE = {
  ConsumerNotFound: 10014,
  StreamNotFound: 10059,
  JetStreamNotEnabledForAccount: 10039,
  JetStreamNotEnabled: 10076,
} as const

/** The HTTP-like status JetStream uses for "cannot serve now" (no leader, no quorum, not enabled). */
const SERVICE_UNAVAILABLE = 503

export function isTransientNatsError(err: unknown): boolean {
  if (err instanceof coreErrors.TimeoutError) return true
  if (err instanceof coreErrors.NoRespondersError) return true
  if (err instanceof coreErrors.RequestError) return isTransientNatsError(err.cause) || err.cause === undefined
  if (err instanceof coreErrors.ClosedConnectionError) return true
  if (err instanceof coreErrors.DrainingConnectionError) return true
  if (err instanceof coreErrors.ConnectionError) return true
  // The client's name for a JetStream API request nobody answered (no leader, server down).
  if (err instanceof jserrors.JetStreamNotEnabled) return true
  if (err instanceof JetStreamApiError) {
    return err.status === SERVICE_UNAVAILABLE || err.code === API_CODE.JetStreamNotEnabled || err.code === API_CODE.JetStreamNotEnabledForAccount
  }
  // The client's own JetStream errors (not an API answer) wrap a core failure as cause.
  if (err instanceof JetStreamError && err.cause !== undefined) return isTransientNatsError(err.cause)
  return false
}

/** The JetStream API error code of `err`, or 0. */
export function apiCode(err: unknown): number {
  return err instanceof JetStreamApiError ? err.code : 0
}

/** Wraps a NATS failure of `what` in the log's error type. */
export function natsError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause
  if (isTransientNatsError(cause)) return unavailable(what, cause)
  return new LogError('log_io', `signal log (JetStream): ${what} failed`, { cause })
}

export function unavailable(what: string, cause?: unknown): LogError {
  return new LogError('unavailable', `signal log (JetStream): ${what} failed for now; retry`, cause === undefined ? undefined : { cause })
}
