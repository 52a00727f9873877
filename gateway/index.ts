export { PortInUseError, startGateway } from './server.js'
export { MillisecondsHistogram } from './metrics-histogram.js'
export type { Gateway, GatewayOptions } from './server.js'
