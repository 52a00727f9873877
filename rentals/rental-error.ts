/**
 * What the rentals store refuses, by code. The HTTP edge maps them: `not_found` 404,
 * `limit_exceeded` 409, `busy` 503 (retry).
 */
export type RentalErrorCode = 'not_found' | 'limit_exceeded' | 'busy'

export class RentalError extends Error {
  readonly code: RentalErrorCode

  constructor(code: RentalErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'RentalError'
    this.code = code
  }
}
