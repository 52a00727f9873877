export { Registry, REGISTRY_LIMITS } from './registry.js';
export { RegistryFile } from './registry-file.js';
export { parsePublicKey } from './public-key.js';
//# sourceMappingURL=index.js.map