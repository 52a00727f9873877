/** Delivery's public entry. SSE, polling and webhook workers arrive with the delivery release. */
export { signalAcceptedEvent } from './signal-event.js';
//# sourceMappingURL=index.js.map