export { startGateway } from './server.js';
export { MAX_BODY_BYTES } from './ingest-edge.js';
//# sourceMappingURL=index.js.map