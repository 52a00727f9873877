import type { LiveKey, SourceRecord } from '../../registry/index.js'
import type { Span } from '../../tracing/index.js'

/** A request that passed the edge's cheap checks and holds a verification slot. */
export interface SignedRequest {
  readonly requestId: string
  readonly receivedAtMs: number
  readonly method: string
  readonly path: string
  readonly source: SourceRecord
  /** Who the verification slot is counted under: the source, or one of its lanes. */
  readonly verifyHolder: string
  readonly key: LiveKey
  readonly timestampHeader: string
  readonly requestTimeMs: number
  readonly nonce: string
  readonly signature: Uint8Array
  /** The first Idempotency-Key header; `idempotencyKeyCount` says how many came. */
  readonly idempotencyKey: string | undefined
  readonly idempotencyKeyCount: number
  readonly body: Buffer
  readonly bodySha256: string
  readonly json: { ok: true; value: unknown } | { ok: false; reason: string }
  /** Set once the nonce is claimed: the ingest-error record keeps it for a restart. */
  nonceClaimed: boolean
  /** The request's `ingest` span when tracing is on: the log append is its child. */
  readonly span?: Span | undefined
}
