/** The recorder stage's public entry: the log consumer that writes receipts, and what it reports. */
export { Recorder } from './recorder.js'
export type { RecorderCounts, RecorderLogger, RecorderOptions, RecorderRegistry, RecorderState, RecorderStatus } from './recorder-options.js'
export { Backoff } from './backoff.js'
