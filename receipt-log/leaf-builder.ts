import { createHash, randomBytes } from 'node:crypto'
import type { OutcomeItem, SignalRecord } from '../pipeline/index.js'
import { receiptIdOf } from '../receipts/index.js'
import { COMMITTED_FIELDS, commitment, committedBytes, encodeLeaf, SALT_BYTES, type CommittedField, type OutcomeLeaf } from '../sdk/receipt-leaf.js'
import type { EntryRow, SignedRequestRow } from './log-store.js'

const sha256 = (data: Uint8Array): Uint8Array => createHash('sha256').update(data).digest()

/** The path a record of an earlier release was signed over: the ingest route's, which never changed. */
const ingestPath = (sourceId: string) => `/v1/byo/sources/${sourceId}/signals`

export interface BuiltSignal {
  readonly request: SignedRequestRow
  /** Absent for a test signal, which the log does not hold. */
  readonly entry?: EntryRow
  readonly leaf?: Uint8Array
}

/**
 * What the sequencer writes for one signal record: its signed request and, for a signal
 * that is not a test, its leaf at `leafIndex` with fresh random salts (one per commitment).
 * `publicKeyOf` finds the key of a record written before records carried it.
 */
export function buildSignal(record: SignalRecord, seq: number, leafIndex: number, publicKeyOf: (sourceId: string, keyId: string) => Uint8Array | undefined): BuiltSignal {
  const receiptId = receiptIdOf(record.source_id, record.signal_id)
  const publicKey = record.public_key !== undefined ? Buffer.from(record.public_key, 'base64') : publicKeyOf(record.source_id, record.key_id) ?? new Uint8Array(0)
  const method = record.method ?? 'POST'
  const path = record.path ?? ingestPath(record.source_id)
  const base = {
    receipt_id: receiptId,
    seq,
    source_id: record.source_id,
    test: record.test,
    method,
    path,
    timestamp: record.request_timestamp,
    nonce: record.nonce,
    body: record.body,
    key_id: record.key_id,
    public_key: Buffer.from(publicKey).toString('base64'),
    signature: record.signature,
  }
  if (record.test) return { request: { ...base, leaf_index: null, leaf: '', salts: '{}' } }
  // One draw from the system's generator for all six salts: each call costs about as much as a hash.
  const drawn = randomBytes(SALT_BYTES * COMMITTED_FIELDS.length)
  const salts = Object.fromEntries(COMMITTED_FIELDS.map((f, i) => [f, drawn.subarray(i * SALT_BYTES, (i + 1) * SALT_BYTES)])) as Record<CommittedField, Buffer>
  const values = committedBytes({
    signal_id: record.signal_id,
    key_id: record.key_id,
    public_key: publicKey,
    note: record.note,
    method,
    path,
    timestamp: record.request_timestamp,
    nonce: record.nonce,
    body: Buffer.from(record.body, 'utf8'),
    signature: Buffer.from(record.signature, 'base64'),
  })
  const commitments = Object.fromEntries(COMMITTED_FIELDS.map((f) => [f, commitment(sha256, salts[f], values[f])])) as Record<CommittedField, Uint8Array>
  const leaf = encodeLeaf({
    kind: 'signal',
    receipt_id: receiptId,
    source_id: record.source_id,
    received_at: record.received_at,
    emitted_at: record.emitted_at,
    token: record.token,
    severity: record.severity,
    confidence: record.confidence,
    commitments,
  })
  const leafText = Buffer.from(leaf).toString('base64')
  const saltsText = JSON.stringify(Object.fromEntries(COMMITTED_FIELDS.map((f) => [f, salts[f].toString('base64')])))
  return {
    request: { ...base, leaf_index: leafIndex, leaf: leafText, salts: saltsText },
    entry: { leaf_index: leafIndex, seq, kind: 'signal', entry_id: receiptId, leaf: leafText },
    leaf,
  }
}

/** The leaf of an accepted dispute, placed where its placement record is in the log. */
export function buildDispute(d: { source_id: string; dispute_id: string; resolved_at: string | null; signals: readonly { signal_id: string }[] }, seq: number, leafIndex: number): { entry: EntryRow; leaf: Uint8Array } {
  const leaf = encodeLeaf({
    kind: 'dispute',
    source_id: d.source_id,
    dispute_id: d.dispute_id,
    resolved_at: d.resolved_at ?? '',
    receipt_ids: d.signals.map((s) => receiptIdOf(d.source_id, s.signal_id)),
  })
  return { entry: { leaf_index: leafIndex, seq, kind: 'dispute', entry_id: d.dispute_id, leaf: Buffer.from(leaf).toString('base64') }, leaf }
}

/** The leaf of a verdict that changed its receipt (./outcome-rule.ts), placed where its post's record is in the log. */
export function buildOutcome(item: OutcomeItem, seq: number, leafIndex: number): { entry: EntryRow; leaf: Uint8Array; decoded: OutcomeLeaf } {
  const decoded: OutcomeLeaf = {
    kind: 'outcome',
    receipt_id: item.receipt_id,
    outcome: item.outcome,
    window_start: item.window_start,
    window_end: item.window_end,
    baseline: item.baseline,
    scored_at: item.scored_at,
  }
  const leaf = encodeLeaf(decoded)
  return { entry: { leaf_index: leafIndex, seq, kind: 'outcome', entry_id: item.receipt_id, leaf: Buffer.from(leaf).toString('base64') }, leaf, decoded }
}
