import type { ApiOptions } from '../gateway/api-routes.js'
import { VerifyPool } from '../pipeline/index.js'
import type { Rentals } from '../rentals/index.js'
import { openEmbeddedGatewayIngest } from './gateway-ingest-embedded.js'
import { openNatsGatewayIngest } from './gateway-ingest-nats.js'
import type { ServiceCore } from './setup.js'

/** The gateway role: signed ingest (verify pool, nonces, dedup) and the control plane. */
export interface GatewayPart {
  readonly api: ApiOptions
  /** Rebuilds (embedded) or connects to (NATS) the ingest state; ingest answers 503 not_ready until it is back. */
  rebuild(): Promise<void>
  /** After the rebuild: the periodic sweep and state saves. */
  run(): void
  /** Stops verifying and saving, and marks the log's end for the state saved at close; the log is still open. */
  stop(failed: boolean): Promise<void>
  /** Closes its files; then, if the log closed cleanly, saves the state the next start takes over. */
  close(logClosed: boolean): Promise<void>
}

export async function openGatewayPart(core: ServiceCore, rentals: Rentals): Promise<GatewayPart> {
  const { config, logger } = core
  const rateCeiling = { perSecond: config.INGEST_MAX_RATE_PER_S, burst: config.INGEST_MAX_BURST }
  const pool = new VerifyPool({
    threads: config.VERIFY_THREADS,
    batchSize: config.VERIFY_BATCH,
    queueLimit: config.VERIFY_QUEUE_LIMIT,
    maxWaitMs: config.VERIFY_MAX_WAIT_MS,
    onError: (err, lost) => {
      const error = err instanceof Error ? err : new Error(String(err))
      if (lost) core.failFatally(error, 'every verify worker failed; stopping so that a restart starts them again')
      else logger.warn({ err }, 'a verify worker failed and was replaced')
    },
  })
  const nats = core.backends.nats
  const ingest = nats === undefined ? await openEmbeddedGatewayIngest(core, { pool, rateCeiling }) : await openNatsGatewayIngest(core, nats, { pool, rateCeiling })
  return {
    api: {
      rateCeiling,
      rentals,
      pipeline: ingest.pipeline,
      pool,
      errors: ingest.errors,
      revocations: ingest.revocations,
    },
    rebuild: () => ingest.rebuild(),
    run: () => ingest.run(),
    async stop(failed) {
      await pool.close()
      await ingest.stop(failed)
    },
    close: (logClosed) => ingest.close(logClosed),
  }
}
