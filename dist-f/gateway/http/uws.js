import { createRequire } from 'node:module';
/**
 * The native uWebSockets.js build for this platform and Node ABI. The package's own
 * entry falls back to a slow JavaScript implementation with only a warning when the
 * binary does not load; we load the binary directly so that a missing build fails
 * at start instead of silently serving from the fallback.
 */
const require = createRequire(import.meta.url);
export const uws = require(`uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`);
//# sourceMappingURL=uws.js.map