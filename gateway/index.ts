export { PortInUseError, startGateway } from './server.js'
export type { Gateway, GatewayOptions } from './server.js'
export { MAX_BODY_BYTES } from './ingest-edge.js'
