import type { NatsConnection } from '@nats-io/transport-node'
import { natsKvBuckets, type KvBucket } from '../../../storage/index.js'
import type { IngestPorts, RevocationScope } from '../ports.js'
import { NatsNonceClaims } from './nonce-claims.js'
import { NatsRefusalHistory } from './refusal-history.js'
import { KvRateBuckets } from './rate-buckets.js'
import { NatsRevocationBarrier } from './revocation-barrier.js'
import { NatsSignalIndex } from './signal-index.js'

export interface NatsIngestOptions {
  /** A connected client, shared by the adapters and left open at close. */
  readonly nc: NatsConnection
  /** Names every stream and bucket of this deployment's ingest state: `[A-Za-z0-9_-]`. */
  readonly name: string
  readonly nonceWindowMs: number
  readonly maxLiveNonces: number
  readonly dedupWindowMs: number
  /** How long an accepted signal id is remembered, past the window (`reused`). */
  readonly signalRetainMs: number
  readonly maxSignalEntries: number
  /** Streams the signal index is spread over by source. */
  readonly signalPartitions: number
  readonly refusalsPerSource: number
  readonly maxRefusals: number
  readonly replicas?: number
  /** Minutes of refusals, never a minute apart, that flag a source for review. */
  readonly flagAfterMinutes: number
  /** Sources the registry may hold, which bounds the rate bucket's keys. */
  readonly maxSources: number
  /** This gateway's registry view has taken in every change made durable before now (see NatsRevocationBarrier). */
  readonly registryCaughtUp?: (scope: RevocationScope) => Promise<void>
  readonly onWarning: (message: string, err: unknown) => void
}

/** A gateway's ingest state on NATS: the ports the pipeline asks, and the refusal history the edge writes. */
export interface NatsIngest {
  readonly ports: IngestPorts
  readonly refusals: NatsRefusalHistory
  /** Withdraws this gateway from the revocation barrier; the connection stays open. */
  close(): Promise<void>
}

/**
 * Opens the NATS adapters of the ingest ports, creating (or bringing up to date) their
 * streams and buckets: `<name>_nonces`, `<name>_signals_<p>`, `<name>_refusals`, and the
 * KV buckets `<name>_barrier` and `<name>_rates`, with subjects under `ingest.<name>.*`.
 */
export async function composeNatsIngest(o: NatsIngestOptions): Promise<NatsIngest> {
  const replicas = o.replicas ?? 1
  const subject = (what: string) => `ingest.${o.name}.${what}`
  const [nonces, signals, refusals, revocations, rateBucket] = await Promise.all([
    NatsNonceClaims.open({ nc: o.nc, stream: `${o.name}_nonces`, subjectPrefix: subject('nonce'), windowMs: o.nonceWindowMs, maxLiveNonces: o.maxLiveNonces, replicas }),
    NatsSignalIndex.open({
      nc: o.nc,
      stream: `${o.name}_signals`,
      subjectPrefix: subject('signal'),
      partitions: o.signalPartitions,
      dedupWindowMs: o.dedupWindowMs,
      retainMs: o.signalRetainMs,
      maxEntries: o.maxSignalEntries,
      replicas,
      onWarning: o.onWarning,
    }),
    NatsRefusalHistory.open({ nc: o.nc, stream: `${o.name}_refusals`, subjectPrefix: subject('refusal'), perSource: o.refusalsPerSource, maxRecords: o.maxRefusals, replicas, onWarning: o.onWarning }),
    NatsRevocationBarrier.open({ nc: o.nc, bucket: `${o.name}_barrier`, replicas, caughtUp: o.registryCaughtUp, onWarning: o.onWarning }),
    natsKvBuckets(o.nc, { replicas })(`${o.name}_rates`, KvRateBuckets.bucketLimits(o.maxSources)) as Promise<KvBucket>,
  ])
  const rates = new KvRateBuckets(rateBucket, { flagAfterMinutes: o.flagAfterMinutes, onWarning: o.onWarning })
  return {
    ports: { nonces, signals, revocations, rates },
    refusals,
    async close() {
      await revocations.close()
      await rateBucket.close()
    },
  }
}
