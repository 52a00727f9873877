/**
 * A receipt log failure with a stable code. `log_inconsistent`: the stored leaves do not
 * hash to a checkpoint already published, so signing on would fork the log; the sequencer
 * stops rather than sign (an operator restores the store from a backup).
 */
export type ReceiptLogErrorCode = 'log_inconsistent' | 'not_yet_logged' | 'unknown_size'

export class ReceiptLogError extends Error {
  readonly code: ReceiptLogErrorCode
  constructor(code: ReceiptLogErrorCode, message: string) {
    super(message)
    this.name = 'ReceiptLogError'
    this.code = code
  }
}
