import type { Logger } from 'pino'
import { isTransientLogError } from '../pipeline/index.js'

/** How long a start waits for NATS to take its streams and buckets: a cluster still electing its leaders, or a server restarting. */
export const START_SETUP_DEADLINE_MS = 60_000
const FIRST_DELAY_MS = 250
const MAX_DELAY_MS = 5_000

/**
 * Runs a setup step of a start on NATS again while it fails transiently (no JetStream
 * leader yet, a request timed out while a cluster creates replicated streams), each
 * failure logged, until `START_SETUP_DEADLINE_MS` has passed; any other failure, or the
 * last one, ends the start.
 */
export async function retryAtStart<T>(what: string, run: () => Promise<T>, logger: Logger, deadlineMs = START_SETUP_DEADLINE_MS): Promise<T> {
  const deadline = Date.now() + deadlineMs
  for (let delay = FIRST_DELAY_MS; ; delay = Math.min(delay * 2, MAX_DELAY_MS)) {
    try {
      return await run()
    } catch (err) {
      if (!isTransientLogError(err) || Date.now() + delay > deadline) throw err
      logger.warn({ err, retry_in_ms: delay }, `${what}: NATS is not ready for it; trying again`)
      await new Promise((resolve) => setTimeout(resolve, delay))
    }
  }
}
