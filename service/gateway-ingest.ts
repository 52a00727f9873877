import type { IngestPipeline, RefusalHistory, RevocationBarrier, VerifyPool } from '../pipeline/index.js'

/**
 * The gateway's ingest state on one backend: the pipeline over its ports, the refusal
 * history the edge writes, and what the state needs at start and stop. Embedded
 * (`gateway-ingest-embedded.ts`): in memory, rebuilt from the journal and saved at
 * close. NATS (`gateway-ingest-nats.ts`): on JetStream, shared by every gateway.
 */
export interface GatewayIngest {
  readonly pipeline: IngestPipeline
  readonly errors: RefusalHistory
  readonly revocations: RevocationBarrier
  /** Brings the state back (or connects to it); ingest answers 503 not_ready until this resolves. */
  rebuild(): Promise<void>
  /** After the rebuild: periodic upkeep. */
  run(): void
  /** No more appends follow (the pool is closed by then); the log is still open. */
  stop(failed: boolean): Promise<void>
  /** Closes what it holds; `logClosed`: the signal log closed cleanly. */
  close(logClosed: boolean): Promise<void>
}

export interface GatewayIngestInput {
  readonly pool: VerifyPool
  readonly rateCeiling: { readonly perSecond: number; readonly burst: number }
}
