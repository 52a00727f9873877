import type { NatsConnection } from '@nats-io/transport-node'
import { LogError } from '../../log-error.js'
import { natsKvBuckets, type KvBucket } from '../../../storage/index.js'
import type { AcceptedSignal, IngestPorts, RevocationScope } from '../ports.js'
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
  const [nonces, signals, refusals, revocations, rateBucket] = await Promise.all([
    openNonceClaims(o),
    openSignalIndex(o),
    NatsRefusalHistory.open({ nc: o.nc, stream: `${o.name}_refusals`, subjectPrefix: subjectOf(o, 'refusal'), perSource: o.refusalsPerSource, maxRecords: o.maxRefusals, replicas, onWarning: o.onWarning }),
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

/**
 * What an embedded deployment moved into a cluster brings into the shared ingest state,
 * so that its accepted signals stay deduplicated and its recent nonces stay spent across
 * the move. Each write is a create-if-absent: false when the entry was there already (a
 * move resumed after an interruption), never a second entry.
 */
export interface IngestCarryOver {
  /** The signal accepted at `acceptedAtMs` under each of `names` (its signal_id, and its Idempotency-Key when another). */
  acceptedSignal(sourceId: string, names: readonly string[], signal: AcceptedSignal, acceptedAtMs: number): Promise<boolean>
  /** The nonce as claimed now: held for the nonce window from this moment. */
  claimedNonce(sourceId: string, keyId: string, nonce: string): Promise<boolean>
}

/** The signal index and the nonce claims alone, on the streams composeNatsIngest opens. */
export async function openIngestCarryOver(o: NatsIngestOptions): Promise<IngestCarryOver> {
  const [nonces, signals] = await Promise.all([openNonceClaims(o), openSignalIndex(o)])
  return {
    acceptedSignal: (sourceId, names, signal, acceptedAtMs) => signals.carryOver(sourceId, names, signal, acceptedAtMs),
    async claimedNonce(sourceId, keyId, nonce) {
      const claim = await nonces.claim({ sourceId, keyId, nonce, now: Date.now(), sourceCap: Number.MAX_SAFE_INTEGER })
      if (claim === 'store_full') throw new LogError('log_io', `ingest state (NATS): the nonce stream ${o.name}_nonces holds all it may (NONCE_STORE_MAX)`)
      return claim === 'claimed'
    },
  }
}

const subjectOf = (o: NatsIngestOptions, what: string) => `ingest.${o.name}.${what}`

function openNonceClaims(o: NatsIngestOptions): Promise<NatsNonceClaims> {
  return NatsNonceClaims.open({ nc: o.nc, stream: `${o.name}_nonces`, subjectPrefix: subjectOf(o, 'nonce'), windowMs: o.nonceWindowMs, maxLiveNonces: o.maxLiveNonces, replicas: o.replicas ?? 1 })
}

function openSignalIndex(o: NatsIngestOptions): Promise<NatsSignalIndex> {
  return NatsSignalIndex.open({
    nc: o.nc,
    stream: `${o.name}_signals`,
    subjectPrefix: subjectOf(o, 'signal'),
    partitions: o.signalPartitions,
    dedupWindowMs: o.dedupWindowMs,
    retainMs: o.signalRetainMs,
    maxEntries: o.maxSignalEntries,
    replicas: o.replicas ?? 1,
    onWarning: o.onWarning,
  })
}
