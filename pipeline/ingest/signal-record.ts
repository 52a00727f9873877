import type { AcceptedBody } from '../../schemas/index.js'
import { isMarkerData } from '../marker-record.js'
import type { AcceptedSignal } from './ports.js'
import type { SignedRequest } from './signed-request.js'

/**
 * A signal as written to the log: the normalised fields renters will see, plus what
 * makes the record self-proving later (the exact raw body, the signature and the
 * signed headers), so a receipt can be re-verified against the creator's key in a
 * dispute without trusting the gateway.
 */
export interface SignalRecord {
  readonly v: 1
  readonly source_id: string
  readonly signal_id: string
  readonly key_id: string
  readonly test: boolean
  readonly received_at: string
  readonly emitted_at: string
  readonly token: string
  readonly severity: string
  readonly confidence: number | null
  readonly note: string | null
  readonly idempotency_key: string | null
  readonly body_sha256: string
  readonly request_timestamp: string
  readonly nonce: string
  /** base64 of the 64-byte signature. */
  readonly signature: string
  /** The raw request body, byte-exact (it is strict UTF-8 JSON, checked before). */
  readonly body: string
  /**
   * The rest of the signing string and the key that verified it, so the receipt log can
   * keep the creator's whole signed request even after the key's record leaves the
   * registry (a revoked key's is dropped in time). Absent in records of earlier releases.
   */
  readonly method?: string
  readonly path?: string
  /** base64 of the 32 raw public-key bytes. */
  readonly public_key?: string
}

/** The log's dedup id: JetStream's Nats-Msg-Id in the cluster deployment. */
export const signalDedupId = (sourceId: string, signalId: string) => `${sourceId}/${signalId}`

export const encodeSignalRecord = (record: SignalRecord): Uint8Array => Buffer.from(JSON.stringify(record))

/** Throws for a record that is not a signal's: a marker (a dispute placement or a post of outcomes: ../marker-record.ts) or bytes that are not JSON. */
export function decodeSignalRecord(data: Uint8Array): SignalRecord {
  if (isMarkerData(data)) throw new TypeError('a marker (a dispute placement or outcomes), not a signal record')
  return JSON.parse(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8')) as SignalRecord
}

/** What the signal index keeps of a logged signal. */
export const dedupRecordOf = (r: SignalRecord): AcceptedSignal => ({
  bodySha256: r.body_sha256,
  signalId: r.signal_id,
  receivedAtMs: Date.parse(r.received_at),
  test: r.test,
})

/** The log record of a request about to be accepted. */
export function signalRecord(
  req: SignedRequest,
  signalId: string,
  test: boolean,
  emittedAtMs: number,
  signal: { token: string; severity: string; confidence?: number; note?: string },
): SignalRecord {
  return {
    v: 1,
    source_id: req.source.source_id,
    signal_id: signalId,
    key_id: req.key.record.key_id,
    test,
    received_at: new Date(req.receivedAtMs).toISOString(),
    emitted_at: new Date(emittedAtMs).toISOString(),
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
    method: req.method,
    path: req.path,
    public_key: Buffer.from(req.key.publicKey).toString('base64'),
  }
}

/**
 * The 202 body: `ok`, `signal_id`, `source_id`, `status` and `received_at`. A replay
 * answers for the original (a retry with the same body gets a 202 with the original
 * `received_at`), and so carries the original's `"test": true` whatever key resent it: a
 * test is recorded and never delivered, and the client is told so rather than refused.
 * `"disputed": true` says that an accepted dispute has since moved the signal to state
 * disputed; `status` stays `accepted`, the outcome of this request.
 */
export function accepted(sourceId: string, record: AcceptedSignal, deduplicated: boolean, disputed: boolean): AcceptedBody {
  return {
    ok: true,
    signal_id: record.signalId,
    source_id: sourceId,
    status: 'accepted',
    received_at: new Date(record.receivedAtMs).toISOString(),
    ...(record.test ? { test: true as const } : {}),
    ...(deduplicated ? { deduplicated: true as const } : {}),
    ...(disputed ? { disputed: true as const } : {}),
  }
}
