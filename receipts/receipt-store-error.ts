/**
 * The one error the receipt store throws. Callers branch on `code` (or `transient`),
 * never on the message.
 */
export type ReceiptStoreErrorCode =
  /** ClickHouse cannot be reached, is overloaded or timed out: retry with backoff; nothing was lost. */
  | 'unavailable'
  /** A caller's value the store does not accept (limit out of range, a malformed id or time). */
  | 'invalid_argument'
  /** A cursor that is not one this store made, or was made for other filters. */
  | 'invalid_cursor'
  /** The stored schema is newer than this code knows: run the newer release, never downgrade. */
  | 'schema_too_new'
  /** The store was closed. */
  | 'store_closed'
  /** ClickHouse refused the statement for a reason a retry will not fix. */
  | 'store_failed'

export class ReceiptStoreError extends Error {
  readonly code: ReceiptStoreErrorCode

  constructor(code: ReceiptStoreErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ReceiptStoreError'
    this.code = code
  }

  /** Whether the same call may succeed later. */
  get transient(): boolean {
    return this.code === 'unavailable'
  }
}

export function isReceiptStoreError(err: unknown, code?: ReceiptStoreErrorCode): err is ReceiptStoreError {
  return err instanceof ReceiptStoreError && (code === undefined || err.code === code)
}
