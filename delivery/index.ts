/** Delivery's public entry: the renter-facing events, the log tail, the streams and stream tickets. */
export { signalAcceptedEvent, rentalEventOf, rentalEndedEvent } from './signal-event.js'
export { parseEventId, signalEventId, endedEventId, disputedEventId, type EventPosition } from './event-id.js'
export { scanRentalEvents, type ScanResult, type ScanStart } from './log-scan.js'
export { LiveTail, LIVE_CONSUMER } from './live-tail.js'
export { StreamHub, type StreamHubOptions } from './stream-hub.js'
export { StreamSession, type EventSink } from './stream-session.js'
export type { TicketGrant, TicketStore } from './ticket-store.js'
export { MemoryTicketStore, TicketStoreFullError } from './ticket-memory.js'
