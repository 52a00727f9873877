/** Moving an embedded deployment into a cluster: the one entry the command (main.ts) and the tests use. */
export { migrateToCluster, type MigrationOptions, type MigrationReport } from './migration.js'
export { MigrationError, type MigrationErrorCode } from './migration-error.js'
export { MARKER_FILE } from './migration-marker.js'
export { formatReport } from './report.js'
