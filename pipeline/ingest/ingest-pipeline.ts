import { ApiError, enforcedMaxRate, ratePerMs, type Manifest, type RateCeiling, signingString, type AcceptedBody } from '../../schemas/index.js'
import type { LiveKey, Registry } from '../../registry/index.js'
import { isLogError } from '../log-error.js'
import type { SignalLog } from '../log.js'
import { readRecord } from '../log-reads.js'
import { isValidSignalId, validateSignalFields } from '../validate/signal-fields.js'
import { isPoolClosed, type VerifyPool } from '../verify/verify-pool.js'
import { keyOrClockRefusal, retiredSourceRefusal, revokedKeyRefusal } from './key-checks.js'
import { IngestState, type RebuildReport, type SavedState } from './embedded/ingest-state.js'
import { RateLimiter } from './rate-limiter.js'
import { findSignal, type SignalLookup } from './signal-lookup.js'
import { accepted, decodeSignalRecord, dedupRecordOf, encodeSignalRecord, signalDedupId, signalRecord, type SignalRecord } from './signal-record.js'
import type { SignedRequest } from './signed-request.js'
import type { RetryNote } from './embedded/retry-notes.js'
import type { AcceptedSignal as DedupRecord } from './ports.js'
import type { Fingerprint, SignalIdHistory } from './embedded/signal-id-history.js'
import type { LogMark } from './embedded/state-snapshot.js'

export type { SignedRequest } from './signed-request.js'

export interface IngestPipelineOptions {
  readonly log: SignalLog
  readonly pool: VerifyPool
  readonly registry: Registry
  readonly now: () => number
  /** Spec 5.2: 10 minutes. */
  readonly nonceWindowMs: number
  /** Memory bound of the nonce store, all sources together. */
  readonly maxLiveNonces: number
  readonly dedupWindowMs: number
  /** Memory bound of the dedup index, all sources together. */
  readonly maxDedupEntries: number
  /** Requests waiting for the durable append past which `hasRoom()` says no. */
  readonly appendQueueLimit: number
  /** Signal ids the log holds, remembered past the dedup window. */
  readonly history: SignalIdHistory
  /**
   * Where the nonce and dedup state is saved (`saveState`: now and then while running, and
   * at a clean shutdown) and taken over by the next start (state-snapshot.ts); without it
   * every start rebuilds from the log.
   */
  readonly stateFile?: string
  /** Where a deduplicated retry's nonce and newly bound Idempotency-Key are kept, which the log does not hold. */
  readonly retryNotes?: { record(note: RetryNote): void }
  readonly flagAfterMinutes: number
  /** The operator's bound on every source's max_rate, also for sources registered under a higher one. */
  readonly rateCeiling: RateCeiling
  /** The log refused an append for good: the service must stop reporting ready. */
  readonly onLogFailure: (err: Error) => void
  /** Something worth a log line that does not change the answer. */
  readonly onWarning: (message: string, err: unknown) => void
}

/**
 * Everything after the edge, in the order of spec 4.1: signature, nonce, signal_id
 * dedup, field validation, rate limit, durable append. The edge has already matched
 * the three source ids (URL, header, body), checked the auth headers, the key's state
 * and the request skew, and reserved a verification slot.
 */
export class IngestPipeline {
  readonly #o: IngestPipelineOptions
  /** The nonce store and the dedup index, and how they outlive the process. */
  readonly #state: IngestState
  readonly #rates: RateLimiter
  /** Requests between their last key check and their answer. */
  readonly #pastLastCheck = new Set<Promise<AcceptedBody>>()
  /**
   * Highest seq the log gave an append, or held at `rebuild`: read on every /metrics
   * scrape, which must not wait for the log (its info is a request in the cluster).
   */
  #logLastSeq = 0

  constructor(options: IngestPipelineOptions) {
    this.#o = options
    this.#state = new IngestState({ ...options, retryNotes: undefined, settled: () => this.settled() })
    this.#rates = new RateLimiter({ flagAfterMinutes: options.flagAfterMinutes })
  }

  /**
   * Whether a new request may enter: verified requests waiting for the durable append are
   * under their limit. Checked by the edge with the verify pool's room, before any parsing,
   * so a stalled disk sheds new work instead of holding a body per connection.
   */
  hasRoom(): boolean {
    return this.#pastLastCheck.size < this.#o.appendQueueLimit
  }

  /** Requests past their last key check, waiting for the durable append or their answer. */
  get appending(): number {
    return this.#pastLastCheck.size
  }

  get liveNonces(): number {
    return this.#state.nonces.size
  }

  get dedupEntries(): number {
    return this.#state.dedup.size
  }

  /** Sequence of the last record in the signal log, as this process knows it. */
  get logLastSeq(): number {
    return this.#logLastSeq
  }

  async process(req: SignedRequest): Promise<AcceptedBody> {
    const { key } = req
    const message = Buffer.from(signingString(req.method, req.path, req.timestampHeader, req.nonce, req.bodySha256))
    const valid = await this.#o.pool.verify({ publicKey: key.publicKey, message, signature: req.signature }, req.verifyHolder).catch((err: unknown) => {
      if (isPoolClosed(err)) throw new ApiError('not_ready', 'the gateway is shutting down; retry', { retryAfter: 1 })
      // A worker that died with the batch: the request was not judged, so it may be retried.
      this.#o.onWarning('a verify batch failed', err)
      throw new ApiError('not_ready', 'the signature could not be checked; retry', { cause: err, retryAfter: 1 })
    })
    if (!valid) throw new ApiError('invalid_signature', 'request signature could not be verified')
    const now = this.#o.now()
    // Revocation is immediate, also for a request that waited for a worker. The skew is
    // checked again at claim time: the nonce window covers a replay only while the
    // timestamp is within it, and a request may have waited since the edge.
    const refusal = retiredSourceRefusal(req.source) ?? keyOrClockRefusal(key, req.requestTimeMs, now)
    if (refusal !== undefined) throw refusal
    // The source's max_rate under the operator's ceiling: sizes its share of the nonce
    // store (the rate step reads it again, as it is then).
    const maxRate = enforcedMaxRate(req.source.manifest.max_rate, this.#o.rateCeiling)
    const nonceRoom = this.#claimNonce(req, now, maxRate)

    if (!req.json.ok) throw new ApiError('invalid_body', `body is not valid JSON: ${req.json.reason}`)
    const value = req.json.value
    if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ApiError('invalid_body', 'body must be a JSON object')
    const signalId = (value as Record<string, unknown>)['signal_id']
    if (!isValidSignalId(signalId)) {
      throw new ApiError('invalid_signal_id', 'signal_id must be 8 to 128 characters of letters, digits, _, - and :')
    }
    // Part of dedup, so checked with it, after the signature: an unsigned header cannot
    // decide the answer ahead of the signed ones.
    if (req.idempotencyKeyCount > 1 || (req.idempotencyKey !== undefined && !isValidSignalId(req.idempotencyKey))) {
      throw new ApiError('invalid_body', 'Idempotency-Key must appear once and follow the signal_id format')
    }
    return this.#deduplicated(req, signalId, nonceRoom)
  }

  /**
   * Claims the request's nonce. False when the source holds its whole share of the nonce
   * store: that is its own excess, refused as rate_limited, but at the rate step, so that a
   * retry of an accepted signal still gets its deduplicated 202 and a bad body its 400
   * (answers a replay cannot turn into a second signal, so they need no nonce).
   */
  #claimNonce(req: SignedRequest, now: number, maxRate: Manifest['max_rate']): boolean {
    const { source, key } = req
    const claim = this.#state.nonces.claim(source.source_id, key.record.key_id, req.nonce, now, nonceCap(maxRate, this.#o.nonceWindowMs))
    switch (claim) {
      case 'claimed':
        req.nonceClaimed = true
        return true
      case 'replayed':
        throw new ApiError('replayed_nonce', 'this nonce was already used with this key in the last 10 minutes')
      case 'source_full':
        return false
      case 'store_full':
        throw new ApiError('overloaded', 'the gateway is holding too many nonces; retry', { retryAfter: 5 })
    }
  }

  /** Dedup by signal_id and Idempotency-Key; concurrent duplicates wait for the first. */
  async #deduplicated(req: SignedRequest, signalId: string, nonceRoom: boolean): Promise<AcceptedBody> {
    const sourceId = req.source.source_id
    for (;;) {
      const found = this.#state.dedup.lookup(sourceId, signalId, req.idempotencyKey, req.bodySha256, this.#o.now())
      switch (found.kind) {
        case 'in_flight':
          await found.settled
          // The wait can outlast a revocation or a retirement, which must win over the replay's 202.
          assertStillTaken(req)
          continue
        case 'replay':
          if (found.unboundKey !== undefined) this.#bindKey(sourceId, found.unboundKey, found.record)
          this.#noteRetry(req, found.record, found.unboundKey)
          if (awaitsTest(req.key)) await this.#markTested(req)
          return accepted(sourceId, found.record, true, this.#o.registry.disputeOf(sourceId, found.record.signalId) !== undefined)
        case 'conflict':
          throw new ApiError('idempotency_conflict', 'this signal_id or Idempotency-Key was already used with a different body')
        case 'new': {
          // Past the dedup window no body is left to compare: a signal id seen before is
          // refused, not accepted as a second signal under the same id.
          const dedupId = signalDedupId(sourceId, signalId)
          const fingerprint = this.#o.history.fingerprint(dedupId)
          if (this.#o.history.has(fingerprint)) {
            throw new ApiError('invalid_signal_id', 'signal_id was already used by this source (signal ids are unique per source)')
          }
          const release = this.#state.dedup.reserve(sourceId, signalId, req.idempotencyKey)
          try {
            return await this.#admit(req, signalId, dedupId, fingerprint, nonceRoom)
          } finally {
            release()
          }
        }
      }
    }
  }

  async #admit(
    req: SignedRequest,
    signalId: string,
    dedupId: string,
    fingerprint: Fingerprint,
    nonceRoom: boolean,
  ): Promise<AcceptedBody> {
    const { source, key } = req
    const fields = validateSignalFields(req.json.ok ? req.json.value : undefined, {
      sourceId: source.source_id,
      severityLevels: source.manifest.severity_levels,
      chains: source.manifest.coverage.chains,
      requestTimeMs: req.requestTimeMs,
      requestTimestamp: req.timestampHeader,
    })
    if (!fields.ok) throw new ApiError(fields.code, fields.message)

    // A source signing far more than its max_rate, over all its keys: its own excess, refused like one.
    if (!nonceRoom) throw new ApiError('rate_limited', 'too many signed requests for this source in the nonce window', { retryAfter: 60 })
    // Read as it is now: a max_rate lowered while this request was verified applies to it.
    const maxRate = enforcedMaxRate(source.manifest.max_rate, this.#o.rateCeiling)
    const rate = this.#rates.take(source.source_id, maxRate, this.#o.now())
    if (!rate.ok) {
      if (rate.sustained && source.flagged_for_review_at === null) {
        this.#o.registry.flagSource(source.source_id).catch((err: unknown) => this.#o.onWarning('could not flag the source for review', err))
      }
      throw new ApiError('rate_limited', `source exceeded its max_rate of ${maxRate.rate} per ${maxRate.per}`, {
        retryAfter: rate.retryAfterS,
      })
    }

    const record = signalRecord(req, signalId, this.#o.registry.signsTests(key), fields.emittedAtMs, fields.signal)
    // The token buys a stored signal: a request refused short of one gives it back.
    const stored = { yes: false }
    try {
      const releaseRoom = this.#dedupRoom(req, signalId)
      try {
        return await this.#append(req, record, dedupId, fingerprint, stored)
      } finally {
        releaseRoom()
      }
    } catch (err) {
      if (!stored.yes) this.#rates.refund(source.source_id)
      throw err
    }
  }

  /** Appends the signal, then remembers it for dedup and in the signal-id history. */
  #append(req: SignedRequest, record: SignalRecord, dedupId: string, fingerprint: Fingerprint, stored: { yes: boolean }): Promise<AcceptedBody> {
    // Last look before the append: a revocation or retirement made by now wins. One made
    // after it waits for this request (settled()) before it is acknowledged.
    assertStillTaken(req)
    const done = this.#appendChecked(req, record, dedupId, fingerprint, stored)
    this.#pastLastCheck.add(done)
    const forget = () => void this.#pastLastCheck.delete(done)
    done.then(forget, forget)
    return done
  }

  /**
   * Whether the source accepted `signalId`, as far back as the signal-id history reaches
   * (`SIGNAL_ID_HISTORY_MAX` newest ids).
   */
  hasAccepted(sourceId: string, signalId: string): boolean {
    return this.#o.history.has(this.#o.history.fingerprint(signalDedupId(sourceId, signalId)))
  }

  /** The seq of the log's last record, asked of the log itself (what its consumers may have been handed). */
  async logEnd(): Promise<number> {
    return (await this.#o.log.info()).lastSeq
  }

  /** An accepted signal's log record, found by the `received_at` of its 202 (./signal-lookup.ts). */
  findAccepted(sourceId: string, signalId: string, receivedAtMs: number, maxLagMs: number, budget: { records: number }): Promise<SignalLookup> {
    return findSignal(this.#o.log, sourceId, signalId, receivedAtMs, maxLagMs, budget)
  }

  /**
   * Resolves once every request that passed its last key check so far has its answer:
   * a revocation acknowledged after this is followed by no 202 under the key.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#pastLastCheck])
    // The answers follow their appends in promise callbacks, with no I/O between (a pending
    // key's test mark aside, whose signal is never delivered): one turn of the loop sees them sent.
    await new Promise((resolve) => setImmediate(resolve))
  }

  async #appendChecked(req: SignedRequest, record: SignalRecord, dedupId: string, fingerprint: Fingerprint, stored: { yes: boolean }): Promise<AcceptedBody> {
    const { source, key } = req
    // The source rides with the record (JetStream: its subject), for consumers that filter on it.
    const appended = await this.#o.log.append(dedupId, encodeSignalRecord(record), { sourceId: source.source_id }).catch((err: unknown) => {
      this.#state.appendRefused()
      // Nothing was promised yet, so the client may retry: the journal refuses appends after
      // a failed write until it is reopened (a restart rebuilds from what reached disk).
      if (isLogError(err, 'log_io') || isLogError(err, 'log_corrupt')) this.#o.onLogFailure(err as Error)
      throw new ApiError('not_ready', 'the signal log is unavailable; retry', { cause: err, retryAfter: 1 })
    })
    stored.yes = !appended.duplicate
    if (appended.seq > this.#logLastSeq) this.#logLastSeq = appended.seq
    if (!appended.duplicate) this.#o.history.add(fingerprint, appended.seq)
    const remembered = appended.duplicate
      ? await this.#original(appended.seq)
      : { bodySha256: req.bodySha256, signalId: record.signal_id, receivedAtMs: req.receivedAtMs, test: record.test }
    this.#state.dedup.remember(source.source_id, req.idempotencyKey, remembered, this.#o.now())
    if (appended.duplicate && remembered.bodySha256 !== req.bodySha256) {
      throw new ApiError('idempotency_conflict', 'this signal_id was already used with a different body')
    }
    if (awaitsTest(key)) await this.#markTested(req)
    return accepted(source.source_id, remembered, appended.duplicate, appended.duplicate && this.#o.registry.disputeOf(source.source_id, record.signal_id) !== undefined)
  }

  /** What the retry changed that the log does not hold: its nonce, a key it bound. */
  #noteRetry(req: SignedRequest, record: DedupRecord, boundKey: string | undefined): void {
    if (this.#o.retryNotes === undefined || (!req.nonceClaimed && boundKey === undefined)) return
    this.#o.retryNotes.record({
      source_id: req.source.source_id,
      key_id: req.key.record.key_id,
      time: req.receivedAtMs,
      ...(req.nonceClaimed ? { nonce: req.nonce } : {}),
      ...(boundKey === undefined
        ? {}
        : { bound: { key: boundKey, signal_id: record.signalId, body_sha256: record.bodySha256, received_at_ms: record.receivedAtMs, test: record.test } }),
    })
  }

  /** The Idempotency-Key a replay brought, bound to its signal; refused like a new signal when there is no room for it. */
  #bindKey(sourceId: string, idempotencyKey: string, record: DedupRecord): void {
    const release = this.#roomFor(sourceId, idempotencyKey, undefined)
    this.#state.dedup.bindKey(sourceId, idempotencyKey, record)
    release()
  }

  /** A signal the dedup index has no room to remember is refused, not accepted unguarded. */
  #dedupRoom(req: SignedRequest, signalId: string): () => void {
    return this.#roomFor(req.source.source_id, signalId, req.idempotencyKey)
  }

  #roomFor(sourceId: string, signalId: string, idempotencyKey: string | undefined): () => void {
    const room = this.#state.dedup.takeRoom(sourceId, signalId, idempotencyKey, this.#o.now())
    switch (room) {
      case 'source_full':
        // Reached only by a source near its max_rate all window long with an Idempotency-Key unlike each signal_id.
        throw new ApiError('rate_limited', 'too many signals of this source in the dedup window', { retryAfter: 60 })
      case 'store_full':
        throw new ApiError('overloaded', 'the gateway is holding too many recent signals; retry', { retryAfter: 5 })
      default:
        return room
    }
  }

  /**
   * The log held this dedup id though the index did not: possible only with a log
   * shared by several gateways (JetStream). The log's first record decides.
   */
  async #original(seq: number): Promise<DedupRecord> {
    const original = await readRecord(this.#o.log, seq)
    if (original === undefined) {
      throw new ApiError('internal_error', `the log reported seq ${seq} as the original but cannot read it`)
    }
    const first = decodeSignalRecord(original.data)
    return dedupRecordOf(first)
  }

  /**
   * Spec 3.1: an accepted test signal lets the key be promoted. Any 202 to a pending
   * key's request counts, a deduplicated one included: the key signed a valid request
   * for a signal the log holds, which is what the test is for (during a rotation the
   * new key's first push is often a signal the old key already sent). Best-effort once
   * the signal is durable: the 202 stands even if the registry write fails, and a retry
   * marks the key again.
   */
  async #markTested(req: SignedRequest): Promise<void> {
    const { key, source } = req
    await this.#o.registry.markTested(source.source_id, key.record.key_id).catch((err: unknown) => this.#o.onWarning('could not mark the key tested', err))
  }

  /** Rebuilds the nonce and dedup state after a restart (IngestState.rebuild). */
  async rebuild(): Promise<RebuildReport> {
    const { lastSeq } = await this.#o.log.info()
    if (lastSeq > this.#logLastSeq) this.#logLastSeq = lastSeq
    return this.#state.rebuild()
  }

  /** Writes the nonce and dedup state for the next start (IngestState.saveState). */
  saveState(mark?: LogMark | null): Promise<SavedState | undefined> {
    return this.#state.saveState(mark)
  }

  /** The log's last record (or the one at `seq`): a state saved now covers it. */
  logMark(seq?: number): Promise<LogMark | null> {
    return this.#state.logMark(seq)
  }

  /** Re-claims a nonce that a refused request used before a restart. */
  restoreNonce(sourceId: string, keyId: string, nonce: string, claimedAt: number): void {
    this.#state.restoreNonce(sourceId, keyId, nonce, claimedAt)
  }

  /** Takes back what a retry noted before a restart (IngestState.restoreRetry). */
  restoreRetry(note: RetryNote): void {
    this.#state.restoreRetry(note)
  }

  /** Drops expired nonces and dedup entries; called from a slow timer. */
  sweep(): void {
    this.#state.sweep()
  }
}

/** A pending key not yet tested. Checked before calling #markTested, so that an accept by any other key costs no async call. */
function awaitsTest(key: LiveKey): boolean {
  return key.record.state === 'pending' && key.record.tested_at === null
}

/** The request's key not revoked and its source not retired, since it was last checked. */
function assertStillTaken(req: SignedRequest): void {
  const refusal = retiredSourceRefusal(req.source) ?? revokedKeyRefusal(req.key)
  if (refusal !== undefined) throw refusal
}

/**
 * Live nonces one source may hold over all its keys: twice what its max_rate allows in
 * a nonce window, plus the burst, and never fewer than 1,000, so a source within its
 * rate never meets the bound.
 */
export function nonceCap(maxRate: Manifest['max_rate'], windowMs: number): number {
  const perWindow = ratePerMs(maxRate) * windowMs
  return Math.max(1000, Math.ceil(2 * perWindow + (maxRate.burst ?? maxRate.rate)))
}
