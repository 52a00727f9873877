import { IngestPipeline, type IngestPipelineOptions } from '../ingest-pipeline.js'
import type { IngestPorts } from '../ports.js'
import { IngestState, type RecoveryReport, type TimeStep } from './ingest-state.js'
import { EmbeddedNonceClaims } from './nonce-claims.js'
import type { EmbeddedRefusalHistory } from './refusal-history.js'
import type { RetryNote } from './retry-notes.js'
import { LocalRateBuckets } from './rate-buckets.js'
import { EmbeddedRevocationBarrier } from './revocation-barrier.js'
import type { SignalIdHistory } from './signal-id-history.js'
import { EmbeddedSignalIndex } from './signal-index.js'

export interface EmbeddedIngestOptions extends Omit<IngestPipelineOptions, 'ports'> {
  /** Memory bound of the nonce store, all sources together. */
  readonly maxLiveNonces: number
  readonly dedupWindowMs: number
  /** Memory bound of the dedup index, all sources together. */
  readonly maxDedupEntries: number
  /** Signal ids the log holds, remembered past the dedup window. */
  readonly history: SignalIdHistory
  /**
   * Where the nonce and dedup state is saved (`state.saveState`: now and then while
   * running, and at a clean shutdown) and taken over by the next start (state-snapshot.ts);
   * without it every start rebuilds from the log.
   */
  readonly stateFile?: string | undefined
  /** Where a deduplicated retry's nonce and newly bound Idempotency-Key are kept, which the log does not hold. */
  readonly retryNotes?: { record(note: RetryNote): void; replay(take: (note: RetryNote) => void): Promise<number> } | undefined
  /** The refusal history, whose refused requests' nonces a start claims again. */
  readonly refusals?: EmbeddedRefusalHistory | undefined
  /** Minutes of refusals, never a minute apart, that flag a source for review. */
  readonly flagAfterMinutes: number
}

/** A gateway's ingest on one process: the pipeline, the ports it asks, and the state behind them. */
export interface EmbeddedIngest {
  readonly pipeline: IngestPipeline
  readonly ports: IngestPorts
  /** Embedded only: the state's saves, sweeps and rebuild, which no other backend has. */
  readonly state: IngestState
  /** Before the first request: the state back from the last save and the log, and the log's end known. */
  recover(time?: TimeStep): Promise<RecoveryReport>
}

/** Builds the embedded adapters of the ingest ports over one IngestState, and the pipeline that asks them. */
export function composeEmbeddedIngest(options: EmbeddedIngestOptions): EmbeddedIngest {
  const revocations = new EmbeddedRevocationBarrier()
  const refusals = options.refusals
  const state = new IngestState({
    log: options.log,
    now: options.now,
    nonceWindowMs: options.nonceWindowMs,
    maxLiveNonces: options.maxLiveNonces,
    dedupWindowMs: options.dedupWindowMs,
    maxDedupEntries: options.maxDedupEntries,
    stateFile: options.stateFile,
    onWarning: options.onWarning,
    settled: () => revocations.settled(),
    refusedNonces: refusals && (() => refusals.takeRefusedNonces()),
    retryNotes: options.retryNotes,
  })
  const ports: IngestPorts = {
    nonces: new EmbeddedNonceClaims(() => state.nonces),
    signals: new EmbeddedSignalIndex({ dedup: () => state.dedup, history: options.history, retryNotes: options.retryNotes, onAppendRefused: () => state.appendRefused() }),
    revocations,
    rates: new LocalRateBuckets({ flagAfterMinutes: options.flagAfterMinutes }),
  }
  const pipeline = new IngestPipeline({ ...options, ports })
  return {
    pipeline,
    ports,
    state,
    async recover(time) {
      const report = await state.recover(time)
      await pipeline.start()
      return report
    },
  }
}
