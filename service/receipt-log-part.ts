import type { LogRouteOptions } from '../gateway/index.js'
import { openLeasedConsumer, type LeasedConsumer } from '../pipeline/index.js'
import { LogKeys, ReceiptLogReader, ReceiptLogSequencer, ReceiptLogStore } from '../receipt-log/index.js'
import type { ClickHouseReceiptStore } from '../receipts/index.js'
import type { KvBucket, LeaseMode } from '../storage/index.js'
import { LEASES_BUCKET_LIMITS, receiptTarget } from './recorder-part.js'
import type { ServiceCore } from './setup.js'

/** The sequencer's durable consumer: one name for the whole deployment. */
export const SEQUENCER_CONSUMER = 'receipt-log'

/**
 * The receipt log's origin: PUBLIC_BASE_URL without its scheme, plus `/log`. It names the
 * log for good (every checkpoint carries it and the keys are named after it), so
 * PUBLIC_BASE_URL must not change once checkpoints are out; without one it is `localhost/log`.
 */
export function logOrigin(publicBaseUrl: string): string {
  return `${publicBaseUrl === '' ? 'localhost' : publicBaseUrl.replace(/^https?:\/\//, '')}/log`
}

export interface ReceiptLogPart {
  /** Where the receipt routes are served. */
  readonly routes: LogRouteOptions | undefined
  /** Starts sequencing (with the recorder); returns at once. */
  start(): void
  close(): Promise<void>
}

/**
 * The receipt log in this process: its reads where the receipt routes are served, and its
 * sequencer where the recorder runs (one per deployment: on NATS under the lease of its
 * consumer, in the recorder's lease mode: refused like a second recorder, or waiting as a
 * standby beside a standby recorder when receipts are on a ClickHouse server).
 */
export async function openReceiptLogPart(
  core: ServiceCore,
  receipts: ClickHouseReceiptStore,
  o: { readonly serve: boolean; readonly sequence: boolean; readonly leased: boolean; readonly leaseMode: LeaseMode },
): Promise<ReceiptLogPart> {
  const { config, logger } = core
  const origin = logOrigin(config.PUBLIC_BASE_URL)
  const store = new ReceiptLogStore(receiptTarget(core), () => receipts.open())
  const keysBucket = await core.openBucket('log-keys', LogKeys.bucketLimits)
  const keys = new LogKeys(keysBucket, origin)
  const reader = o.serve ? new ReceiptLogReader(store) : undefined
  let leases: KvBucket | undefined
  let consumer: LeasedConsumer | undefined
  // Ends a standby's wait for the lease when the process stops.
  const stopping = new AbortController()
  const openLease = () =>
    openLeasedConsumer(core.signalLog, leases!, SEQUENCER_CONSUMER, undefined, {
      mode: o.leaseMode,
      signal: stopping.signal,
      onLost: (loss) => core.failFatally(new Error(`the receipt log sequencer's lease was lost (${loss.reason}, now held by ${loss.holder ?? 'nobody'})`), 'receipt log lease lost; stopping so that another sequencer goes on'),
      onError: (err) => logger.warn({ err }, 'receipt log lease: a renewal failed'),
    })
  try {
    if (o.sequence && o.leased) {
      leases = await core.openBucket('leases', LEASES_BUCKET_LIMITS)
      // Refused here, before listening, when another sequencer holds it; a standby waits in start().
      if (o.leaseMode === 'refuse') consumer = await core.steps.time('receipt_log_lease', openLease)
    }
  } catch (err) {
    await leases?.close()
    await keysBucket.close()
    throw err
  }
  const leased = leases !== undefined
  const sequencer = o.sequence
    ? new ReceiptLogSequencer({
        log: core.signalLog,
        store,
        keys,
        registry: core.registry,
        origin,
        checkpointMs: config.RECEIPT_LOG_CHECKPOINT_MS,
        logger,
        onFatal: (err) => core.failFatally(err, 'the receipt log cannot go on without forking; restore its tables from a backup'),
        ...(leased && { openConsumer: async () => (consumer ??= await openLease()), holds: () => consumer?.holds() === true }),
        ...(reader && { onCheckpoint: (cp) => reader.offer(cp) }),
      })
    : undefined
  return {
    routes: reader && { reader, store, keys, keyOverlapMs: config.RECEIPT_LOG_KEY_OVERLAP_S * 1000 },
    start: () => sequencer?.start(),
    async close() {
      let failure: unknown
      stopping.abort()
      for (const close of [async () => sequencer?.close(), async () => consumer?.close(), async () => leases?.close(), () => keysBucket.close(), () => store.close()]) {
        await close().catch((err: unknown) => (failure ??= err))
      }
      if (failure !== undefined) throw failure
    },
  }
}
