/** The renter's delivery channels over HTTP: the event stream (SSE), stream tickets and polling. */
export { registerStreamRoutes, type StreamRouteOptions } from './stream-routes.js'
export { registerPollRoute, POLL_PAGE, POLL_SCAN_MAX, type PollRouteOptions } from './poll-route.js'
export { registerStreamMetrics } from './stream-metrics.js'
