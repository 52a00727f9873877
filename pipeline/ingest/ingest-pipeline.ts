import { ApiError } from '../../schemas/api-error.js'
import { isLogError } from '../log-journal.js'
import type { LiveKey, Registry, SourceRecord } from '../../registry/index.js'
import type { SignalLog } from '../log.js'
import { isValidSignalId, validateSignalFields } from '../validate/signal-fields.js'
import type { VerifyPool } from '../verify/verify-pool.js'
import type { DedupIndex, DedupRecord } from './dedup-index.js'
import type { NonceStore } from './nonce-store.js'
import type { RateLimiter } from './rate-limiter.js'
import { decodeSignalRecord, encodeSignalRecord, signalDedupId, type SignalRecord } from './signal-record.js'

/** A request that passed the edge's cheap checks, on its way through verification. */
export interface SignedRequest {
  readonly requestId: string
  readonly receivedAtMs: number
  readonly method: string
  readonly path: string
  readonly source: SourceRecord
  readonly key: LiveKey
  readonly timestampHeader: string
  readonly requestTimeMs: number
  readonly nonce: string
  readonly signature: Uint8Array
  readonly idempotencyKey: string | undefined
  readonly body: Buffer
  readonly bodySha256: string
  readonly json: { ok: true; value: unknown } | { ok: false; reason: string }
  /** Filled in as the request advances, for the ingest-error record. */
  nonceClaimed: boolean
  signalId: string | null
}

/** Spec section 2.3, plus `test` for a pending key's test signal and `deduplicated` for a replay. */
export interface AcceptedBody {
  readonly ok: true
  readonly signal_id: string
  readonly source_id: string
  readonly status: 'accepted'
  readonly received_at: string
  readonly test?: true
  readonly deduplicated?: true
}

export interface IngestPipelineParts {
  readonly log: SignalLog
  readonly pool: VerifyPool
  readonly nonces: NonceStore
  readonly dedup: DedupIndex
  readonly rates: RateLimiter
  readonly registry: Registry
  readonly now: () => number
  /** Called when the log refuses an append; the service stops reporting ready. */
  readonly onLogFailure: (err: Error) => void
}

/**
 * Everything after the edge, in the order of spec 4.1: signature, nonce, signal_id
 * dedup, field validation, rate limit, durable append. The edge has already matched
 * the three source ids, checked the headers, the key's state and the request skew.
 */
export class IngestPipeline {
  readonly #p: IngestPipelineParts

  constructor(parts: IngestPipelineParts) {
    this.#p = parts
  }

  async process(req: SignedRequest): Promise<AcceptedBody> {
    const { source, key } = req
    const message = Buffer.from(`${req.method}\n${req.path}\n${req.timestampHeader}\n${req.nonce}\n${req.bodySha256}`)
    const valid = await this.#p.pool.verify({ publicKey: key.publicKey, message, signature: req.signature })
    if (!valid) throw new ApiError('invalid_signature', 'request signature could not be verified')
    // The key may have been revoked while the request waited for a worker: revocation is immediate.
    if (key.record.state === 'revoked') throw new ApiError('revoked_key', 'the signing key is revoked')

    if (!this.#p.nonces.claim(source.source_id, key.record.key_id, req.nonce, this.#p.now())) {
      throw new ApiError('replayed_nonce', 'this nonce was already used with this key in the last 10 minutes')
    }
    req.nonceClaimed = true

    if (!req.json.ok) throw new ApiError('invalid_body', `body is not valid JSON: ${req.json.reason}`)
    const value = req.json.value as Record<string, unknown> | null
    const signalId = typeof value === 'object' && value !== null && !Array.isArray(value) ? value['signal_id'] : undefined
    if (!isValidSignalId(signalId)) {
      throw new ApiError('invalid_signal_id', 'signal_id must be 8 to 128 characters of letters, digits, _, - and :')
    }
    req.signalId = signalId
    return this.#deduplicated(req, signalId)
  }

  /** Dedup by signal_id and Idempotency-Key; concurrent duplicates wait for the first. */
  async #deduplicated(req: SignedRequest, signalId: string): Promise<AcceptedBody> {
    const sourceId = req.source.source_id
    for (;;) {
      const found = this.#p.dedup.lookup(sourceId, signalId, req.idempotencyKey, req.bodySha256, this.#p.now())
      switch (found.kind) {
        case 'in_flight':
          await found.settled
          continue
        case 'replay':
          return accepted(sourceId, found.record, true)
        case 'conflict':
          throw new ApiError('idempotency_conflict', 'this signal_id or Idempotency-Key was already used with a different body')
        case 'new': {
          const release = this.#p.dedup.reserve(sourceId, signalId, req.idempotencyKey)
          try {
            return await this.#admit(req, signalId)
          } finally {
            release()
          }
        }
      }
    }
  }

  async #admit(req: SignedRequest, signalId: string): Promise<AcceptedBody> {
    const { source, key } = req
    const fields = validateSignalFields(req.json.ok ? req.json.value : undefined, {
      sourceId: source.source_id,
      severityLevels: source.manifest.severity_levels,
      chains: source.manifest.coverage.chains,
      requestTimeMs: req.requestTimeMs,
    })
    if (!fields.ok) throw new ApiError(fields.code, fields.message)

    const rate = this.#p.rates.take(source.source_id, source.manifest.max_rate, this.#p.now())
    if (!rate.ok) {
      if (rate.sustained && source.flagged_for_review_at === null) void this.#p.registry.flagSource(source.source_id).catch(() => undefined)
      throw new ApiError('rate_limited', `source exceeded its max_rate of ${source.manifest.max_rate.rate} per ${source.manifest.max_rate.per}`, {
        retryAfter: rate.retryAfterS,
      })
    }

    const test = key.record.state === 'pending'
    const { signal } = fields
    const record: SignalRecord = {
      v: 1,
      source_id: source.source_id,
      signal_id: signalId,
      key_id: key.record.key_id,
      test,
      received_at: new Date(req.receivedAtMs).toISOString(),
      emitted_at: new Date(fields.emittedAtMs).toISOString(),
      token: signal.token,
      severity: signal.severity,
      confidence: signal.confidence ?? null,
      note: signal.note ?? null,
      idempotency_key: req.idempotencyKey ?? null,
      body_sha256: req.bodySha256,
      request_timestamp: req.timestampHeader,
      nonce: req.nonce,
      signature: Buffer.from(req.signature).toString('base64'),
      body: req.body.toString('utf8'),
    }
    const appended = await this.#p.log.append(signalDedupId(source.source_id, signalId), encodeSignalRecord(record)).catch((err: unknown) => {
      // Nothing was promised yet: the client retries, and the log's dedup id makes that safe.
      if (isLogError(err)) this.#p.onLogFailure(err)
      throw new ApiError('not_ready', 'the signal log is unavailable; retry', { cause: err, retryAfter: 1 })
    })
    let remembered: Omit<DedupRecord, 'expiresAt'> = { bodySha256: req.bodySha256, signalId, receivedAt: record.received_at, test }
    if (appended.duplicate) {
      // The log held this id though the index did not (a restart raced a retry): its record decides.
      const [original] = await this.#p.log.read({ fromSeq: appended.seq }, 1)
      if (original === undefined) throw new Error(`log reported duplicate seq ${appended.seq} but cannot read it`)
      const first = decodeSignalRecord(original.data)
      remembered = { bodySha256: first.body_sha256, signalId, receivedAt: first.received_at, test: first.test }
    }
    this.#p.dedup.remember(source.source_id, req.idempotencyKey, remembered, this.#p.now())
    if (appended.duplicate) {
      if (remembered.bodySha256 !== req.bodySha256) throw new ApiError('idempotency_conflict', 'this signal_id was already used with a different body')
      return accepted(source.source_id, { ...remembered, expiresAt: 0 }, true)
    }
    if (test && key.record.tested_at === null) await this.#p.registry.markTested(source.source_id, key.record.key_id)
    return accepted(source.source_id, { ...remembered, expiresAt: 0 }, false)
  }

  /**
   * Rebuilds the nonce and dedup state from the log after a restart, so a retry of a
   * signal accepted before a crash still gets its deduplicated 202 and a captured
   * request cannot be replayed.
   */
  async rebuild(windows: { dedupMs: number; nonceMs: number }): Promise<number> {
    const now = this.#p.now()
    let restored = 0
    let start: { fromTime: number } | { fromSeq: number } = { fromTime: now - windows.dedupMs }
    for (;;) {
      const batch = await this.#p.log.read(start, 4096)
      if (batch.length === 0) return restored
      for (const entry of batch) {
        const r = decodeSignalRecord(entry.data)
        this.#p.dedup.remember(
          r.source_id,
          r.idempotency_key ?? undefined,
          { bodySha256: r.body_sha256, signalId: r.signal_id, receivedAt: r.received_at, test: r.test },
          entry.time,
        )
        if (entry.time >= now - windows.nonceMs) this.#p.nonces.restore(r.source_id, r.key_id, r.nonce, entry.time, now)
        restored++
      }
      start = { fromSeq: (batch[batch.length - 1] as { seq: number }).seq + 1 }
    }
  }
}

function accepted(sourceId: string, record: DedupRecord, deduplicated: boolean): AcceptedBody {
  return {
    ok: true,
    signal_id: record.signalId,
    source_id: sourceId,
    status: 'accepted',
    received_at: record.receivedAt,
    ...(record.test ? { test: true as const } : {}),
    ...(deduplicated ? { deduplicated: true as const } : {}),
  }
}
