/**
 * The one error type the signal log adapters throw. Callers branch on `code`, never on
 * the message: the message is for people and may change.
 *
 * Transient: `unavailable` only. The same call may succeed later, and the log is still
 * good (retry with backoff). Every other code is permanent for the call as made:
 * `log_io` and `log_corrupt` mean the log itself failed and must be reopened (or
 * repaired) before it is trusted again; `log_closed`, `record_too_large` and
 * `invalid_argument` are the caller's to fix; `consumer_held` and `lease_lost` say
 * another process runs (or may now run) the consumer.
 */
export type LogErrorCode =
  /** The log (or the consumer) was closed, or never opened; nothing was done. */
  | 'log_closed'
  /** The framed record would exceed the per-record limit; nothing was written. */
  | 'record_too_large'
  /**
   * Transient: the backend cannot be reached or cannot serve now (NATS down, the process
   * out of file descriptors, the disk full for a consumer position). Nothing was written
   * for an ack; the log stays usable. Retry.
   */
  | 'unavailable'
  /** The file system failed; for appends, whether the bytes reached disk is unknown. */
  | 'log_io'
  /** Stored bytes fail their framing or checksum outside the recoverable tail. */
  | 'log_corrupt'
  /** A caller passed a value the contract does not allow. */
  | 'invalid_argument'
  /** A durable consumer is leased by another live process (named in the error's `holder`); nothing was opened. */
  | 'consumer_held'
  /** The lease of a durable consumer was lost (taken over, or not renewed in time): the consumer stopped and must not fetch or ack again. */
  | 'lease_lost'

export class LogError extends Error {
  readonly code: LogErrorCode

  constructor(code: LogErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'LogError'
    this.code = code
  }
}

/** `consumer_held`, naming the holder of the consumer's lease, so an operator can find the other process. */
export class ConsumerHeldError extends LogError {
  readonly holder: string

  constructor(consumer: string, holder: string) {
    super('consumer_held', `consumer ${consumer} is held by ${holder}: one process at a time pulls a durable consumer; stop that one, or start this one as a standby`)
    this.holder = holder
  }
}

export function isLogError(err: unknown, code?: LogErrorCode): err is LogError {
  return err instanceof LogError && (code === undefined || err.code === code)
}

/** True for the codes a retry of the same call may get past (see the file comment). */
export function isTransientLogError(err: unknown): boolean {
  return isLogError(err, 'unavailable')
}

/** Wraps a file-system failure at the adapter edge so nothing above matches on errno text. */
export function ioError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause
  return new LogError('log_io', `signal log: ${what} failed`, { cause })
}

/** Failures that pass on their own: out of descriptors, out of space or memory for a moment. */
const TRANSIENT_ERRNO = new Set(['EMFILE', 'ENFILE', 'EAGAIN', 'ENOMEM', 'ENOSPC'])

/**
 * Like `ioError`, for operations that leave nothing half-done when they fail (opening a
 * segment to read it, replacing the consumer positions file): a passing cause is
 * `unavailable`, anything else `log_io`. Never for segment writes and syncs, after which
 * the written state is unknown.
 */
export function retryableIoError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause
  for (let e = cause, depth = 0; e !== null && typeof e === 'object' && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as NodeJS.ErrnoException).code
    if (code !== undefined && TRANSIENT_ERRNO.has(code)) {
      return new LogError('unavailable', `signal log: ${what} failed for now (${code}); retry`, { cause })
    }
  }
  return ioError(what, cause)
}
