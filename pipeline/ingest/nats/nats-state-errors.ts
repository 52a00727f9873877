/**
 * NATS failures of the ingest state turned into the signal log's typed error at the
 * adapter edge (the pipeline already answers a transient LogError with a 503 and
 * Retry-After), decided by error class and JetStream API code, never by text.
 */
import { JetStreamApiError } from '@nats-io/jetstream'
import { isTransientNatsError } from '../../jetstream/nats-errors.js'
import { LogError } from '../../log-error.js'

/** JetStream API codes the ingest adapters branch on. */
export const STATE_API_CODE = {
  /** An `expect.lastSubjectSequence` that did not hold: the subject has (or no longer has) that message. */
  WrongLastSequence: 10071,
  /** A store failure; with `discard: new`, the stream holds all the messages it may (max_msgs or max_bytes). */
  StoreFailed: 10077,
  NoMessageFound: 10037,
} as const

export function apiCodeOf(err: unknown): number {
  return err instanceof JetStreamApiError ? err.code : 0
}

/** Wraps a NATS failure of `what`: `unavailable` (retry) when transient, `log_io` otherwise. */
export function stateError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause
  if (isTransientNatsError(cause)) return new LogError('unavailable', `ingest state (NATS): ${what} failed for now; retry`, { cause })
  return new LogError('log_io', `ingest state (NATS): ${what} failed`, { cause })
}
