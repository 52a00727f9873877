import { isPlacementData } from './dispute-placement.js'
import { isOutcomeData } from './outcome-record.js'

/**
 * Whether a log record's data is a marker, not a signal: a dispute placement
 * (./dispute-placement.ts) or a post of outcomes (./outcome-record.ts). Readers that want
 * signals only pass over every marker with this one test, so a new kind of marker is
 * added here and nowhere else.
 */
export const isMarkerData = (data: Uint8Array): boolean => isPlacementData(data) || isOutcomeData(data)
