import type { Config } from '../config/index.js'
import { DeliveryKeys, webhookBucketLimits, WebhookSecrets } from '../delivery/index.js'
import { KvUsageMeter } from '../gateway/index.js'
import { LogKeys } from '../receipt-log/index.js'
import { Registry } from '../registry/index.js'
import { Rentals } from '../rentals/index.js'
import type { KvBucketLimits } from '../storage/index.js'

export interface MovedBucket {
  readonly name: string
  limits(config: Config): KvBucketLimits
  /** Keys of the bucket that stay behind. */
  readonly leaves?: (key: string) => boolean
}

/**
 * The key-value buckets an embedded deployment keeps under DATA_DIR/kv that move into the
 * cluster, each opened there with the limits the service opens it with:
 * - `registry`: tokens, agents, sources, keys, retired keys and disputes;
 * - `rentals`;
 * - `webhooks`: each rental's endpoint, how far its deliveries got, the retry under way,
 *   the recent attempts, dead letters and re-sends asked for. Positions are log
 *   sequences, which stay valid: the cluster's signal stream starts after the journal's
 *   last record (stream-start.ts). Its shard leases (`lease.*`) stay behind: they name
 *   the embedded process, and the cluster's delivery processes would wait for them to
 *   lapse before delivering;
 * - `delivery-keys`: the ring of webhook signing keys, private keys included, so
 *   receivers keep verifying with the public keys they hold;
 * - `webhook-secrets`: the `whsec_` secrets of webhooks signed with scheme `v1`, so those
 *   receivers keep verifying too;
 * - `usage`: the renters' metered reads;
 * - `log-keys`: the receipt log's signing keys, private keys included, every one it ever
 *   used: the cluster's sequencer signs its checkpoints with the same current key, and
 *   GET /v1/log/keys still lists the keys of the checkpoints already published.
 */
export const MOVED_BUCKETS: readonly MovedBucket[] = [
  { name: 'registry', limits: () => Registry.bucketLimits() },
  { name: 'rentals', limits: (config) => Rentals.bucketLimits(config.RENTALS_MAX) },
  { name: 'webhooks', limits: (config) => webhookBucketLimits(config.RENTALS_MAX), leaves: (key) => key.startsWith('lease.') },
  { name: 'delivery-keys', limits: () => DeliveryKeys.bucketLimits },
  { name: 'webhook-secrets', limits: (config) => WebhookSecrets.bucketLimits(config.RENTALS_MAX) },
  { name: 'usage', limits: () => KvUsageMeter.bucketLimits },
  { name: 'log-keys', limits: () => LogKeys.bucketLimits },
]

/**
 * Buckets left behind, each for a reason: `leases` names the processes of the embedded
 * deployment, which hold nothing in the cluster; `tickets` and `ticket-holdings` are
 * stream tickets, which live for STREAM_TICKET_TTL_MS (renters ask for new ones, as after
 * any ticket's expiry); `stream-places` exists only on NATS.
 */
export const LEFT_BEHIND: ReadonlySet<string> = new Set(['leases', 'tickets', 'ticket-holdings', 'stream-places'])
