export { PortInUseError, startGateway } from './server.js'
export type { Gateway, GatewayOptions } from './server.js'
export { Metrics, type ScrapeReadings } from './metrics.js'
export { METRICS_PAGES_PER_SECOND } from './metrics-route.js'
