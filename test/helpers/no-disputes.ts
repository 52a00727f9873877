import { DisputeGate } from '../../registry/index.js'
import type { RentalDisputes } from '../../delivery/index.js'

/** A registry without disputes, for delivery tests about signals only. */
export const noDisputes = (): RentalDisputes => ({ acceptedDisputesOf: () => [], disputeGate: new DisputeGate(() => undefined), watchDisputes: () => () => undefined })
