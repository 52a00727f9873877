/**
 * The one error type the signal log adapters throw. Callers branch on `code`, never on
 * the message: the message is for people and may change.
 */
export type LogErrorCode =
  /** The log was closed (or never opened); nothing was written. */
  | 'log_closed'
  /** The framed record would exceed the per-record limit; nothing was written. */
  | 'record_too_large'
  /** The file system failed; for appends, whether the bytes reached disk is unknown. */
  | 'log_io'
  /** Stored bytes fail their framing or checksum outside the recoverable tail. */
  | 'log_corrupt'
  /** A caller passed a value the contract does not allow. */
  | 'invalid_argument'

export class LogError extends Error {
  readonly code: LogErrorCode

  constructor(code: LogErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'LogError'
    this.code = code
  }
}

export function isLogError(err: unknown, code?: LogErrorCode): err is LogError {
  return err instanceof LogError && (code === undefined || err.code === code)
}

/** Wraps a file-system failure at the adapter edge so nothing above matches on errno text. */
export function ioError(what: string, cause: unknown): LogError {
  if (cause instanceof LogError) return cause
  return new LogError('log_io', `signal log: ${what} failed`, { cause })
}
