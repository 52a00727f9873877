/** The rentals' public entry: the store, its records and their helpers, and its bounds. */
export { Rentals, type NewRental, type RentalFilter, type RentalsOptions } from './rental-store.js'
export { effectiveRental, isActive, isFinal, type RentalRecord, type RentalState } from './records.js'
export { RentalError, type RentalErrorCode } from './rental-error.js'
export { RENTAL_LIMITS } from './limits.js'
