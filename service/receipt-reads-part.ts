import type { ReceiptRouteOptions } from '../gateway/index.js'
import { KvUsageMeter, MemoryReadRateLimiter } from '../gateway/index.js'
import { appendOutcomes } from '../pipeline/index.js'
import type { ReceiptStore } from '../receipts/index.js'
import type { Rentals } from '../rentals/index.js'
import type { ServiceCore } from './setup.js'

/** The receipt reads, exports, usage, source status and scoring, over this process's receipt store. */
export interface ReceiptReadsPart {
  readonly routes: ReceiptRouteOptions
  close(): Promise<void>
}

export async function openReceiptReadsPart(core: ServiceCore, receipts: ReceiptStore, rentals: Rentals): Promise<ReceiptReadsPart> {
  const { config, logger, steps } = core
  // Rows exported per caller, on the key-value port like every shared counter.
  const usageBucket = await steps.time('usage', () => core.openBucket('usage', KvUsageMeter.bucketLimits))
  const usage = new KvUsageMeter(usageBucket, { onWarning: (message, err) => logger.warn({ err }, message) })
  return {
    routes: {
      receipts,
      // Every process can append to the signal log (a cluster's is JetStream), so outcomes are logged wherever they are posted.
      logOutcomes: async (items) => void (await appendOutcomes(core.signalLog, items)),
      rentals,
      statusCacheMs: config.STATUS_CACHE_MS,
      reads: {
        limiter: new MemoryReadRateLimiter(config.READ_RATE_TRACKED_MAX),
        rates: { anonymousPerMin: config.READ_RATE_ANON_PER_MIN, tokenPerMin: config.READ_RATE_TOKEN_PER_MIN, rentalPerMin: config.READ_RATE_RENTAL_PER_MIN },
        exportsPerCaller: config.EXPORT_CONCURRENT_PER_PRINCIPAL,
        exportsMax: config.EXPORT_CONCURRENT_MAX,
        exportIdleTimeoutMs: config.EXPORT_IDLE_TIMEOUT_MS,
        meter: usage,
      },
    },
    async close() {
      let failure: unknown
      for (const close of [() => usage.close(), () => usageBucket.close()]) await close().catch((err: unknown) => (failure ??= err))
      if (failure !== undefined) throw failure
    },
  }
}
