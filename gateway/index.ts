export { PortInUseError, startGateway } from './server.js'
export type { Gateway, GatewayOptions } from './server.js'
