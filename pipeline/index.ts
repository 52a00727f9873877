/** The pipeline's public entry: what the gateway and the process entry may use. */
export type {
  AppendOptions, AppendResult, ConsumeOptions, ConsumerInfo, ConsumerOptions, FetchResult, FsyncPolicy, LogConsumer, LogInfo, LogRecord, LostRange, ReadStart, SignalLog,
} from './log.js'
export { MAX_FETCH_RECORDS, MAX_FETCH_WAIT_MS } from './log.js'
export { openJournal } from './log-journal.js'
export { ConsumerHeldError, LogError, isLogError, isTransientLogError } from './log-error.js'
export type { LogErrorCode } from './log-error.js'
export type { Journal, JournalOptions, RetentionReport } from './log-journal.js'
export { JOURNAL_DEFAULTS } from './log-journal.js'
export { VerifyPool } from './verify/verify-pool.js'
export type { VerifyPoolOptions } from './verify/verify-pool.js'
export { IngestPipeline } from './ingest/ingest-pipeline.js'
export type { IngestPipelineOptions, SignedRequest } from './ingest/ingest-pipeline.js'
export type {
  AcceptedSignal, IngestErrorPage, IngestErrorRecord, IngestPorts, NonceClaim, NonceClaimRequest, NonceClaims, RateBuckets, RateDecision, RefusalHistory, RevocationBarrier, RevocationScope,
  SignalCheck, SignalCheckRequest, SignalIndex, SignalReservation,
} from './ingest/ports.js'
export { composeEmbeddedIngest, type EmbeddedIngest, type EmbeddedIngestOptions } from './ingest/embedded/embedded-ingest.js'
export { composeNatsIngest, type NatsIngest, type NatsIngestOptions } from './ingest/nats/nats-ingest.js'
export { scheduleStateSaves } from './ingest/embedded/state-saves.js'
export { IngestErrorLog } from './ingest/embedded/ingest-error-log.js'
export { EmbeddedRefusalHistory } from './ingest/embedded/refusal-history.js'
export { RetryNotes, type RetryNote } from './ingest/embedded/retry-notes.js'
export { SignalIdHistory } from './ingest/embedded/signal-id-history.js'
export { decodeSignalRecord, signalDedupId } from './ingest/signal-record.js'
export type { SignalRecord } from './ingest/signal-record.js'
export type { SignalLookup } from './ingest/signal-lookup.js'
export { LOOKUP_MAX_RECORDS } from './ingest/signal-lookup.js'
export { parseStrictJson } from './validate/strict-json.js'
export { parseIsoUtc } from './validate/iso-timestamp.js'
export { isValidSignalId } from './validate/signal-fields.js'
export { keyOrClockRefusal, unknownKeyRefusal } from './ingest/key-checks.js'
export { openLeasedConsumer, CONSUMER_LEASE_MS, defaultHolderId, type ConsumerLeaseOptions, type LeasedConsumer } from './leased-consumer.js'
