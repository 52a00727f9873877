/** Bounds on rentals besides RENTALS_MAX (config): what one renter and one source may have open at once. */
export const RENTAL_LIMITS = {
  /** Scheduled or active rentals of one renter. */
  openPerRenter: 100,
  /**
   * Scheduled or active rentals of one source: each is a fan-out of every signal the
   * source accepts (a stream or webhook per rental), so the bound caps that work.
   */
  openPerSource: 1000,
  /**
   * How long a claim on a renter's or a source's count holds without its rental record:
   * a creation under way in another process, or one that failed halfway.
   */
  claimGraceMs: 60_000,
  /** Tries of a write that lost a revision race before the request gives up with 503. */
  writeAttempts: 8,
  /** Bytes of a stored record; claims of openPerSource rentals fit in it. */
  maxValueBytes: 64 * 1024,
} as const
