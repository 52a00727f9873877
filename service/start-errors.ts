/** The errors a start can end with that the process entry maps to exit codes (main.ts). */
export { DataDirLockedError } from './data-dir-lock.js'
export { PortInUseError } from '../gateway/index.js'
export { ConsumerHeldError, isLogError } from '../pipeline/index.js'
export { RegistryError } from '../registry/index.js'
