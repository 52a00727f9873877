/**
 * The bounds of a webhook loop's run: the events it delivers between two writes of its
 * position and attempts. A process that dies re-sends at most its last run, so these are
 * also the bound on what a renter receives twice after a crash or a take-over. A file of
 * its own so that what checks the bound reads it without loading the loop.
 */

/** Events delivered between two writes of the position and the attempts (one run), at most. */
export const RUN_MAX_EVENTS = 256
/** How long a run lasts at most before its position and attempts are written. */
export const RUN_MAX_MS = 1000
