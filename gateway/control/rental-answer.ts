import { RentalError } from '../../rentals/index.js'
import { ApiError } from '../../schemas/index.js'
import { isKvError } from '../../storage/index.js'

/** The store's refusals and the bucket's failures as API errors; anything else is a 500. */
export async function rentalAnswer<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work()
  } catch (err) {
    if (err instanceof RentalError) {
      if (err.code === 'busy') throw new ApiError('overloaded', err.message, { retryAfter: 1, cause: err })
      throw new ApiError(err.code, err.message, { cause: err })
    }
    if (isKvError(err, 'bucket_full')) throw new ApiError('limit_exceeded', 'the rentals store is full', { cause: err })
    if (isKvError(err) && err.transient) throw new ApiError('overloaded', 'the rentals store is unavailable for a moment; retry', { retryAfter: 1, cause: err })
    throw err
  }
}

