import { randomBytes } from 'node:crypto'
import { hostname } from 'node:os'
import { DeliveryKeys, KvStreamPlaces, KvTicketStore, LiveTail, MemoryStreamPlaces, placesBucketLimits, StreamHub, Webhooks, webhookBucketLimits, WebhookSecrets, type StreamPlaces } from '../delivery/index.js'
import type { KvBucket } from '../storage/index.js'
import { MillisecondsHistogram } from '../gateway/index.js'
import type { DeliveryRouteOptions } from '../gateway/role-routes.js'
import type { Rentals } from '../rentals/index.js'
import type { ServiceCore } from './setup.js'

/** Stream tickets outstanding at once, all renters together: the last bound, past the per-rental and per-renter ones; past it a new one gets 503 overloaded. */
export const STREAM_TICKETS_MAX = 100_000

/** Delivery latency buckets in milliseconds: a live stream's few milliseconds up to a webhook retried for an hour. */
const DELIVERY_LATENCY_BOUNDS_MS = [1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000, 300_000, 3_600_000] as const

/** The delivery role: the renters' event streams, polling, stream tickets and webhooks. */
export interface DeliveryPart {
  readonly routes: DeliveryRouteOptions
  /** Stops the webhook workers, the streams' hub and the log tail; then closes its buckets. */
  close(): Promise<void>
}

/**
 * Every channel follows the process's one tail of the log and reads the log to catch up,
 * so what was accepted while no delivery ran here is delivered when this part starts:
 * webhooks resume from their stored positions, and streams and polling from the
 * client's event id.
 */
export async function openDeliveryPart(core: ServiceCore, rentals: Rentals): Promise<DeliveryPart> {
  const { config, logger, steps, signalLog, registry } = core
  // One tail of the log feeds every rental event stream and webhook of this process.
  const tail = await steps.time('delivery_tail', () => LiveTail.start(signalLog, (err) => logger.warn({ err }, 'delivery tail: reading the log failed; retrying'), core.backends.tailConsumerName))
  // Renters' webhooks: endpoints, positions, retry state, attempts and dead letters on the key-value port.
  const webhooksBucket = await steps.time('webhooks', () => core.openBucket('webhooks', webhookBucketLimits(config.RENTALS_MAX)))
  // The delivery key ring, private keys included, in a bucket of its own so that access to it can be granted apart from the rest (a secret).
  const keysBucket = await steps.time('delivery_keys', () => core.openBucket('delivery-keys', DeliveryKeys.bucketLimits))
  // The v1 webhooks' HMAC secrets: a secret as the key ring is, in a bucket of its own for the same reason.
  const secretsBucket = await steps.time('webhook_secrets', () => core.openBucket('webhook-secrets', WebhookSecrets.bucketLimits(config.RENTALS_MAX)))
  const webhookLatency = new MillisecondsHistogram(
    'sgw_webhook_delivery_latency_seconds',
    "From the log storing a signal to the receiver's 2xx of its first delivery, retries included (re-sends and dispute events not counted).",
    DELIVERY_LATENCY_BOUNDS_MS,
  )
  const webhooks = await Webhooks.open({
    dataDir: core.dataDir,
    bucket: webhooksBucket,
    keysBucket,
    secretsBucket,
    watchRentals: (listener) => rentals.onChange(listener),
    log: signalLog,
    tail,
    rental: (id) => rentals.get(id),
    disputes: registry,
    allowPrivateNetworks: config.WEBHOOK_ALLOW_PRIVATE_NETWORKS === 'true',
    retryWindowMs: config.WEBHOOK_RETRY_WINDOW_S * 1000,
    retryFirstMs: config.WEBHOOK_RETRY_FIRST_MS,
    disableAfterMs: config.WEBHOOK_DISABLE_AFTER_S * 1000,
    maxConnections: config.WEBHOOK_CONCURRENCY,
    keyOverlapMs: config.DELIVERY_KEY_OVERLAP_S * 1000,
    leaseMs: config.WEBHOOK_LEASE_MS,
    testsPerMinute: config.WEBHOOK_TESTS_PER_MINUTE,
    latency: webhookLatency,
    // An empty rental id is a failure of the whole process's webhooks (the endpoints' watch, the shard leases), not of one rental's loop.
    onError: (err, rentalId) =>
      rentalId === ''
        ? logger.warn({ err }, 'webhooks: the endpoints watch or a shard lease renewal failed')
        : logger.warn({ err, rental_id: rentalId }, 'webhook delivery loop failed; it starts again shortly'),
    onWarning: (message, err) => logger.warn({ err }, message),
  })
  // Tickets on the key-value port: one issued here opens a stream on any process sharing the bucket.
  const ticketBounds = { maxPerRental: config.STREAM_TICKETS_MAX_PER_RENTAL, maxPerRenter: config.STREAM_TICKETS_MAX_PER_RENTER }
  const ticketsBucket = await steps.time('tickets', () => core.openBucket('tickets', KvTicketStore.bucketLimits(STREAM_TICKETS_MAX)))
  const holdingsBucket = await steps.time('ticket_holdings', () => core.openBucket('ticket-holdings', KvTicketStore.holdingsLimits(STREAM_TICKETS_MAX, ticketBounds)))
  const tickets = await KvTicketStore.open({ bucket: ticketsBucket, holdings: holdingsBucket, bounds: ticketBounds, sweepMs: config.STREAM_TICKET_TTL_MS, onWarning: (message, err) => logger.warn({ err }, message) })
  const streamLatency = new MillisecondsHistogram(
    'sgw_stream_delivery_latency_seconds',
    'From the log storing a signal to its byo.signal.accepted event being written to a live rental event stream, per stream (events replayed on a resume not included).',
    DELIVERY_LATENCY_BOUNDS_MS,
  )
  // The per-rental cap of open streams: shared on NATS, where any delivery process serves any rental's streams; in memory for the one embedded process.
  let placesBucket: KvBucket | undefined
  let places: StreamPlaces
  if (core.backends.sharedStreamPlaces) {
    placesBucket = await steps.time('stream_places', () => core.openBucket('stream-places', placesBucketLimits(config.RENTALS_MAX, config.STREAM_MAX_PER_RENTAL)))
    places = new KvStreamPlaces({ bucket: placesBucket, max: config.STREAM_MAX_PER_RENTAL, holder: placesHolder(), onWarning: (message, err) => logger.warn({ err }, message) })
  } else {
    places = new MemoryStreamPlaces(config.STREAM_MAX_PER_RENTAL)
  }
  const hub = new StreamHub({ log: signalLog, tail, rentals, registry, places, endSettleMs: config.STREAM_END_SETTLE_MS, latency: streamLatency })
  // A webhook that starts failing or is disabled is told live on its rental's open streams, in every process.
  const unwatchHealth = webhooks.onHealthChange((notice) => hub.notice(notice.rental_id, notice))
  return {
    routes: {
      webhooks,
      latency: [streamLatency, webhookLatency],
      streams: {
        hub,
        rentals,
        log: signalLog,
        tickets,
        ticketTtlMs: config.STREAM_TICKET_TTL_MS,
        heartbeatMs: config.STREAM_HEARTBEAT_MS,
        retryMs: config.STREAM_RETRY_MS,
        bufferBytes: config.STREAM_BUFFER_BYTES,
        stallMs: config.STREAM_STALL_TIMEOUT_MS,
        endSettleMs: config.STREAM_END_SETTLE_MS,
      },
    },
    async close() {
      unwatchHealth()
      await webhooks.close()
      hub.close()
      await tail.close()
      await tickets.close()
      // After the streams closed (the gateway's drain): what is still held is given back now rather than left to expire.
      await places.close()
      let failure: unknown
      for (const close of [() => ticketsBucket.close(), () => holdingsBucket.close(), () => webhooksBucket.close(), () => keysBucket.close(), () => secretsBucket.close(), async () => placesBucket?.close()]) await close().catch((err: unknown) => (failure ??= err))
      if (failure !== undefined) throw failure
    },
  }
}

/**
 * This process's name in the records of stream places: its host and pid for the
 * operator, and random bytes, so that a restart (the same pid in a container) never takes
 * the entries of its previous life for its own; those expire.
 */
function placesHolder(): string {
  return `${hostname().slice(0, 64)}/${process.pid}/${randomBytes(6).toString('hex')}`
}
