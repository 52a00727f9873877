import { ApiError, enforcedMaxRate, ratePerMs, type Manifest, type RateCeiling, signingString, type AcceptedBody } from '../../schemas/index.js'
import type { LiveKey, Registry, SourceRecord } from '../../registry/index.js'
import { encodePlacement, placementDedupId } from '../dispute-placement.js'
import { isLogError, isTransientLogError } from '../log-error.js'
import type { SignalLog } from '../log.js'
import { readRecord } from '../log-reads.js'
import { isValidSignalId, validateSignalFields } from '../validate/signal-fields.js'
import { isPoolClosed, type VerifyPool } from '../verify/verify-pool.js'
import { keyOrClockRefusal, retiredSourceRefusal, revokedKeyRefusal } from './key-checks.js'
import type { AcceptedSignal, IngestPorts, RevocationScope, SignalReservation } from './ports.js'
import { findSignal, type SignalLookup } from './signal-lookup.js'
import { accepted, decodeSignalRecord, dedupRecordOf, encodeSignalRecord, signalDedupId, signalRecord, type SignalRecord } from './signal-record.js'
import type { SignedRequest } from './signed-request.js'
import { endSpan, startSpan } from '../../tracing/index.js'

export type { SignedRequest } from './signed-request.js'

export interface IngestPipelineOptions {
  readonly log: SignalLog
  readonly pool: VerifyPool
  readonly registry: Registry
  /** The shared ingest state: nonce claims, the signal index, the revocation barrier. */
  readonly ports: IngestPorts
  readonly now: () => number
  /** How long a claimed nonce is held: 10 minutes, which sizes each source's share of a bounded nonce store. */
  readonly nonceWindowMs: number
  /** Requests waiting for the durable append past which `hasRoom()` says no. */
  readonly appendQueueLimit: number
  /** The operator's bound on every source's max_rate, also for sources registered under a higher one. */
  readonly rateCeiling: RateCeiling
  /** The log refused an append for good: the service must stop reporting ready. */
  readonly onLogFailure: (err: Error) => void
  /** Something worth a log line that does not change the answer. */
  readonly onWarning: (message: string, err: unknown) => void
}

/**
 * Everything after the edge, in the documented order of checks: signature, request
 * timestamp and nonce, signal_id dedup, field validation, rate limit, durable append.
 * The edge has already matched the three source ids (URL, header, body), checked the
 * auth headers, the key's state and the request skew, and reserved a verification slot.
 *
 * The state shared with other gateways is asked through the ports (ports.ts), each
 * request on its own: a request awaiting a claim or a check holds up no other.
 */
export class IngestPipeline {
  readonly #o: IngestPipelineOptions
  readonly #ports: IngestPorts
  /** Requests between their last key check and their answer. */
  #appending = 0
  /**
   * Highest seq the log gave an append, or held at `start`: read on every /metrics
   * scrape, which must not wait for the log (its info is a request in the cluster).
   */
  #logLastSeq = 0

  constructor(options: IngestPipelineOptions) {
    this.#o = options
    this.#ports = options.ports
  }

  /** Reads the log's end once before the first request, for `logLastSeq` until the first append. */
  async start(): Promise<void> {
    const { lastSeq } = await this.#o.log.info()
    if (lastSeq > this.#logLastSeq) this.#logLastSeq = lastSeq
  }

  /**
   * Whether a new request may enter: verified requests waiting for the durable append are
   * under their limit. Checked by the edge with the verify pool's room, before any parsing,
   * so a stalled disk sheds new work instead of holding a body per connection.
   */
  hasRoom(): boolean {
    return this.#appending < this.#o.appendQueueLimit
  }

  /** Requests past their last key check, waiting for the durable append or their answer. */
  get appending(): number {
    return this.#appending
  }

  get liveNonces(): number {
    return this.#ports.nonces.size
  }

  get dedupEntries(): number {
    return this.#ports.signals.size
  }

  /** Sequence of the last record in the signal log, as this process knows it. */
  get logLastSeq(): number {
    return this.#logLastSeq
  }

  async process(req: SignedRequest): Promise<AcceptedBody> {
    try {
      return await this.#process(req)
    } catch (err) {
      // A port of the shared ingest state (NATS) could not answer for now: no stream leader
      // during an election, a timed-out request. Nothing was promised; the client retries
      // with a fresh nonce, and a signal the log took meanwhile is then found, not doubled.
      if (isTransientLogError(err)) throw new ApiError('not_ready', 'the ingest state is unavailable; retry', { cause: err, retryAfter: 1 })
      throw err
    }
  }

  async #process(req: SignedRequest): Promise<AcceptedBody> {
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
    const source = sourceNow(this.#o.registry, req)
    const refusal = retiredSourceRefusal(source) ?? keyOrClockRefusal(key, req.requestTimeMs, now)
    if (refusal !== undefined) throw refusal
    // The source's max_rate under the operator's ceiling: sizes its share of the nonce
    // store (the rate step reads it again, as it is then).
    const maxRate = enforcedMaxRate(source.manifest.max_rate, this.#o.rateCeiling)
    const nonceRoom = await this.#claimNonce(req, now, maxRate)

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
  async #claimNonce(req: SignedRequest, now: number, maxRate: Manifest['max_rate']): Promise<boolean> {
    const { source, key } = req
    const claim = await this.#ports.nonces.claim({
      sourceId: source.source_id,
      keyId: key.record.key_id,
      nonce: req.nonce,
      now,
      sourceCap: nonceCap(maxRate, this.#o.nonceWindowMs),
    })
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
      const found = await this.#ports.signals.check({
        sourceId,
        signalId,
        idempotencyKey: req.idempotencyKey,
        bodySha256: req.bodySha256,
        now: this.#o.now(),
        keyId: req.key.record.key_id,
        claimedNonce: req.nonceClaimed ? req.nonce : undefined,
        receivedAtMs: req.receivedAtMs,
      })
      switch (found.kind) {
        case 'in_flight':
          await found.settled
          // The wait can outlast a revocation or a retirement, which must win over the replay's 202.
          assertStillTaken(this.#o.registry, req)
          continue
        case 'replay':
          return this.#replayed(req, found.signal)
        case 'conflict':
          throw new ApiError('idempotency_conflict', 'this signal_id or Idempotency-Key was already used with a different body')
        case 'reused':
          throw new ApiError('invalid_signal_id', 'signal_id was already used by this source (signal ids are unique per source)')
        case 'no_room':
          throw noRoomRefusal(found.room)
        case 'new':
          try {
            return await this.#admit(req, signalId, found.reservation, nonceRoom)
          } finally {
            found.reservation.release()
          }
      }
    }
  }

  /**
   * The 202 of a retry, for the signal the index holds. Its last look at the key comes
   * after the check (which another backend answers over the network). A pending key's
   * answer waits for its test mark, so it holds the revocation barrier until then, like
   * an append; any other is answered in the turn of that look, with nothing to hold.
   */
  #replayed(req: SignedRequest, signal: AcceptedSignal): AcceptedBody | Promise<AcceptedBody> {
    assertStillTaken(this.#o.registry, req)
    const sourceId = req.source.source_id
    const body = () => accepted(sourceId, signal, true, this.#o.registry.disputeOf(sourceId, signal.signalId) !== undefined)
    if (!awaitsTest(req.key)) return body()
    const answer = this.#markTested(req).then(body)
    this.#ports.revocations.hold(scopeOf(req), answer)
    return answer
  }

  async #admit(req: SignedRequest, signalId: string, reservation: SignalReservation, nonceRoom: boolean): Promise<AcceptedBody> {
    const { key } = req
    // Read as it is now: a manifest changed while this request was verified applies to it.
    const source = sourceNow(this.#o.registry, req)
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
    const rate = await this.#ports.rates.take(source.source_id, maxRate, this.#o.now())
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
      // A signal the index has no room to remember is refused, not accepted unguarded.
      const room = await reservation.takeRoom(this.#o.now())
      if (room !== 'ok') throw noRoomRefusal(room)
      return await this.#append(req, record, reservation, stored)
    } catch (err) {
      if (!stored.yes) void this.#ports.rates.refund(source.source_id, maxRate)
      throw err
    }
  }

  /** Appends the signal, then has the index remember it. */
  #append(req: SignedRequest, record: SignalRecord, reservation: SignalReservation, stored: { yes: boolean }): Promise<AcceptedBody> {
    // Last look before the append: a revocation or retirement made by now wins. One made
    // after it waits for this request (the revocation barrier) before it is acknowledged.
    assertStillTaken(this.#o.registry, req)
    const done = this.#appendChecked(req, record, reservation, stored)
    this.#ports.revocations.hold(scopeOf(req), done)
    this.#appending++
    const forget = () => void this.#appending--
    done.then(forget, forget)
    return done
  }

  /** Whether the source accepted `signalId`, as far back as the signal index's history reaches. */
  hasAccepted(sourceId: string, signalId: string): Promise<boolean> {
    return this.#ports.signals.hasAccepted(sourceId, signalId)
  }

  /**
   * Appends the placement of an accepted dispute (../dispute-placement.ts) under its
   * source; `attempt` tells this acceptance's record from an earlier attempt's. Resolves
   * with its seq, once durable like a signal's.
   */
  async placeDispute(sourceId: string, disputeId: string, attempt: string): Promise<number> {
    const dedupId = placementDedupId(sourceId, disputeId, attempt)
    const appended = await this.#o.log.append(dedupId, encodePlacement(sourceId, disputeId), { sourceId })
    if (!appended.duplicate) this.#ports.signals.logged(dedupId, appended.seq)
    return appended.seq
  }

  /** An accepted signal's log record, found by the `received_at` of its 202 (./signal-lookup.ts). */
  findAccepted(sourceId: string, signalId: string, receivedAtMs: number, maxLagMs: number, budget: { records: number }): Promise<SignalLookup> {
    return findSignal(this.#o.log, sourceId, signalId, receivedAtMs, maxLagMs, budget)
  }

  async #appendChecked(req: SignedRequest, record: SignalRecord, reservation: SignalReservation, stored: { yes: boolean }): Promise<AcceptedBody> {
    const { source, key } = req
    // The source rides with the record (JetStream: its subject), for consumers that filter on it.
    // A child of the request's span when tracing is on (the durable append is most of a 202's time).
    const span = req.span === undefined ? undefined : startSpan('signal_log.append', { parent: req.span })
    const appended = await this.#o.log.append(signalDedupId(source.source_id, record.signal_id), encodeSignalRecord(record), { sourceId: source.source_id }).catch((err: unknown) => {
      if (span !== undefined) endSpan(span, 'log_unavailable')
      reservation.appendRefused()
      // Nothing was promised yet, so the client may retry: the journal refuses appends after
      // a failed write until it is reopened (a restart rebuilds from what reached disk).
      if (isLogError(err, 'log_io') || isLogError(err, 'log_corrupt')) this.#o.onLogFailure(err as Error)
      throw new ApiError('not_ready', 'the signal log is unavailable; retry', { cause: err, retryAfter: 1 })
    })
    if (span !== undefined) {
      span.setAttributes({ 'sgw.log.seq': appended.seq, 'sgw.log.duplicate': appended.duplicate })
      endSpan(span)
    }
    stored.yes = !appended.duplicate
    if (appended.seq > this.#logLastSeq) this.#logLastSeq = appended.seq
    const remembered = appended.duplicate
      ? await this.#original(appended.seq)
      : { bodySha256: req.bodySha256, signalId: record.signal_id, receivedAtMs: req.receivedAtMs, test: record.test }
    await reservation.accepted(remembered, appended, this.#o.now())
    if (appended.duplicate && remembered.bodySha256 !== req.bodySha256) {
      throw new ApiError('idempotency_conflict', 'this signal_id was already used with a different body')
    }
    if (awaitsTest(key)) await this.#markTested(req)
    return accepted(source.source_id, remembered, appended.duplicate, appended.duplicate && this.#o.registry.disputeOf(source.source_id, record.signal_id) !== undefined)
  }

  /**
   * The log held this dedup id though the index did not: possible only with a log
   * shared by several gateways (JetStream). The log's first record decides.
   */
  async #original(seq: number): Promise<AcceptedSignal> {
    const original = await readRecord(this.#o.log, seq)
    if (original === undefined) {
      throw new ApiError('internal_error', `the log reported seq ${seq} as the original but cannot read it`)
    }
    const first = decodeSignalRecord(original.data)
    return dedupRecordOf(first)
  }

  /**
   * An accepted test signal lets a pending key be promoted. Any 202 to a pending key's
   * request counts, a deduplicated one included: the key signed a valid request for a
   * signal the log holds, which is what the test is for (during a rotation the new key's
   * first push is often a signal the old key already sent). Best-effort once the signal
   * is durable: the 202 stands even if the registry write fails, and a retry marks the
   * key again.
   */
  async #markTested(req: SignedRequest): Promise<void> {
    const { key, source } = req
    await this.#o.registry.markTested(source.source_id, key.record.key_id).catch((err: unknown) => this.#o.onWarning('could not mark the key tested', err))
  }
}

/** A bounded signal index without room for the entries a signal or a bound key would take. */
function noRoomRefusal(room: 'source_full' | 'store_full'): ApiError {
  // source_full is reached only by a source near its max_rate all window long with an Idempotency-Key unlike each signal_id.
  return room === 'source_full'
    ? new ApiError('rate_limited', 'too many signals of this source in the dedup window', { retryAfter: 60 })
    : new ApiError('overloaded', 'the gateway is holding too many recent signals; retry', { retryAfter: 5 })
}

function scopeOf(req: SignedRequest): RevocationScope {
  return { sourceId: req.source.source_id, keyId: req.key.record.key_id }
}

/** A pending key not yet tested. Checked before calling #markTested, so that an accept by any other key costs no async call. */
function awaitsTest(key: LiveKey): boolean {
  return key.record.state === 'pending' && key.record.tested_at === null
}

/**
 * The request's source as the registry holds it now: its records are replaced, not
 * changed, when any process retires the source or changes its manifest, so a request
 * that waited reads it again rather than the copy the edge found.
 */
function sourceNow(registry: Registry, req: SignedRequest): SourceRecord {
  return registry.anySource(req.source.source_id) ?? req.source
}

/** The request's key not revoked and its source not retired, since it was last checked. */
function assertStillTaken(registry: Registry, req: SignedRequest): void {
  const refusal = retiredSourceRefusal(sourceNow(registry, req)) ?? revokedKeyRefusal(req.key)
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
