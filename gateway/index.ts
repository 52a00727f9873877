export { startGateway } from './server.js'
export type { Gateway, GatewayOptions } from './server.js'
export { MAX_BODY_BYTES, MAX_SKEW_MS } from './ingest-edge.js'
