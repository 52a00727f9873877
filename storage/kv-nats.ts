import type { NatsConnection } from '@nats-io/transport-node'
import type { OpenKvBucket } from './kv-store.js'
import { NatsKvBucket, type NatsKvOptions } from './nats/nats-kv-bucket.js'

export type { NatsKvOptions }

/**
 * Buckets on NATS KV over `nc` (the caller's connection, which the buckets never close).
 * Each process opening a bucket of the same name shares it: the watches carry one
 * process's changes to the others.
 */
export function natsKvBuckets(nc: NatsConnection, options: NatsKvOptions = {}): OpenKvBucket {
  return (name, limits) => NatsKvBucket.open(nc, name, limits, options)
}
