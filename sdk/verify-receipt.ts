import * as ed from '@noble/ed25519'
import { sha256 } from '@noble/hashes/sha2.js'
import { fromBase64, toHex } from './bytes.js'
import { merkleLeafHash, verifyConsistency, verifyInclusion } from './merkle-proof.js'
import { COMMITTED_FIELDS, commitment, committedBytes, decodeLeaf, SALT_BYTES, type CommittedField, type SignalLeaf } from './receipt-leaf.js'
import { NoteError, parseVerifierKey, verifyCheckpoint, type Checkpoint, type NoteVerifierKey } from './signed-note.js'
import { signingString } from './signing-string.js'

/**
 * Checks a receipt's proof bundle (GET /v1/byo/receipts/:receipt_id/proof) offline, in
 * Node or a browser, trusting nothing but the log's verifier key:
 *
 * 1. the checkpoint is signed by the log key (`checkpoint_signature`);
 * 2. the leaf is a well-formed signal leaf (`leaf`) and the inclusion proof leads from its
 *    hash at `leaf_index` to the checkpoint's root (`inclusion`);
 * 3. with the whole bundle (a reader entitled to the receipt): the body's hash matches its
 *    commitment (`body_hash`), the creator's Ed25519 signature over the signing string
 *    verifies with the given public key (`creator_signature`), and every other commitment
 *    and clear field of the leaf matches the request and the body (`leaf`);
 * 4. with `checkpoint` (a later checkpoint the caller holds, from a monitor or an earlier
 *    look) and `consistencyProof` between the two: the log the receipt is in is the log
 *    the caller saw, not a fork (`consistency`).
 *
 * A public bundle (no `request`, no `salts`) proves the leaf is in the log; it cannot show
 * the creator signed it (`creatorSigned` is false in the result).
 */

export type ReceiptCheck = 'malformed_bundle' | 'checkpoint_signature' | 'leaf' | 'inclusion' | 'body_hash' | 'creator_signature' | 'consistency'

export class ReceiptVerifyError extends Error {
  readonly code = 'invalid_receipt'
  /** Which check refused the bundle. */
  readonly reason: ReceiptCheck
  constructor(reason: ReceiptCheck, message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'ReceiptVerifyError'
    this.reason = reason
  }
}

export interface ReceiptRequest {
  readonly method: string
  readonly path: string
  readonly timestamp: string
  readonly nonce: string
  /** Base64 of the exact body bytes. */
  readonly body: string
  readonly key_id: string
  /** Base64 of the 64 signature bytes. */
  readonly signature: string
  /** Base64 of the 32 raw public-key bytes. */
  readonly public_key: string
}

export interface ReceiptBundle {
  readonly leaf_index: number
  /** Base64 of the leaf bytes. */
  readonly leaf: string
  /** Base64 hashes, leaf side first (RFC 9162). */
  readonly inclusion_proof: readonly string[]
  /** The signed checkpoint the proof is against. */
  readonly checkpoint: string
  readonly request?: ReceiptRequest
  /** Base64 of each commitment's 16-byte salt. */
  readonly salts?: Readonly<Record<CommittedField, string>>
}

export interface VerifyReceiptOptions {
  /** The log's verifier key(s) (GET /v1/log/key): several during a rotation. */
  readonly logKey: string | readonly string[]
  /** A signed checkpoint the caller already trusts: the bundle's must be consistent with it. */
  readonly checkpoint?: string
  /** Base64 hashes: the consistency proof between the smaller and the larger of the two checkpoints (GET /v1/log/consistency). */
  readonly consistencyProof?: readonly string[]
}

export interface VerifiedReceipt {
  readonly leafIndex: number
  readonly checkpoint: Checkpoint
  readonly leaf: SignalLeaf
  /** Whether the creator's signature and the hidden fields were checked (a whole bundle). */
  readonly creatorSigned: boolean
  /** From the body, for a whole bundle. */
  readonly signal?: { readonly signal_id: string; readonly key_id: string; readonly note: string | null }
}

const fail = (reason: ReceiptCheck, message: string, cause?: unknown): never => {
  throw new ReceiptVerifyError(reason, message, cause === undefined ? undefined : { cause })
}

const b64 = (text: unknown, what: string, length?: number): Uint8Array => {
  const bytes = typeof text === 'string' ? fromBase64(text) : undefined
  if (bytes === undefined || (length !== undefined && bytes.length !== length)) return fail('malformed_bundle', `${what} is not base64${length === undefined ? '' : ` of ${length} bytes`}`)
  return bytes
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])

function logKeys(logKey: string | readonly string[]): NoteVerifierKey[] {
  try {
    return (typeof logKey === 'string' ? [logKey] : logKey).map(parseVerifierKey)
  } catch (err) {
    return fail('checkpoint_signature', (err as Error).message, err)
  }
}

function openCheckpoint(note: unknown, keys: readonly NoteVerifierKey[], what: string): Checkpoint {
  if (typeof note !== 'string') return fail('malformed_bundle', `${what} is not text`)
  try {
    return verifyCheckpoint(note, keys)
  } catch (err) {
    if (err instanceof NoteError && err.code === 'invalid_checkpoint') return fail('malformed_bundle', err.message, err)
    return fail('checkpoint_signature', `${what}: ${(err as Error).message}`, err)
  }
}

export function verifyReceipt(bundle: ReceiptBundle, options: VerifyReceiptOptions): VerifiedReceipt {
  if (typeof bundle !== 'object' || bundle === null) return fail('malformed_bundle', 'the bundle is not an object')
  const keys = logKeys(options.logKey)
  const checkpoint = openCheckpoint(bundle.checkpoint, keys, 'the bundle\'s checkpoint')
  const leafBytes = b64(bundle.leaf, 'leaf')
  let leaf: SignalLeaf
  try {
    const decoded = decodeLeaf(leafBytes)
    if (decoded.kind !== 'signal') return fail('leaf', 'the leaf is not a signal\'s')
    leaf = decoded
  } catch (err) {
    if (err instanceof ReceiptVerifyError) throw err
    return fail('leaf', (err as Error).message, err)
  }
  if (!Array.isArray(bundle.inclusion_proof)) return fail('malformed_bundle', 'inclusion_proof is not a list')
  const proof = bundle.inclusion_proof.map((h, i) => b64(h, `inclusion_proof[${i}]`, 32))
  if (!verifyInclusion(bundle.leaf_index, checkpoint.size, merkleLeafHash(leafBytes), proof, checkpoint.rootHash)) {
    fail('inclusion', `the inclusion proof does not lead from leaf ${bundle.leaf_index} to the root of the checkpoint of size ${checkpoint.size}`)
  }
  let signal: VerifiedReceipt['signal']
  if (bundle.request !== undefined || bundle.salts !== undefined) signal = checkSignedRequest(bundle, leaf)
  if (options.checkpoint !== undefined) checkConsistency(checkpoint, openCheckpoint(options.checkpoint, keys, 'the given checkpoint'), options.consistencyProof ?? [])
  return { leafIndex: bundle.leaf_index, checkpoint, leaf, creatorSigned: signal !== undefined, ...(signal && { signal }) }
}

function checkConsistency(a: Checkpoint, b: Checkpoint, proofText: readonly string[]): void {
  if (a.origin !== b.origin) fail('consistency', `the checkpoints are of two logs (${a.origin}, ${b.origin})`)
  const proof = proofText.map((h, i) => b64(h, `consistencyProof[${i}]`, 32))
  const [small, large] = a.size <= b.size ? [a, b] : [b, a]
  if (!verifyConsistency(small.size, large.size, small.rootHash, large.rootHash, proof)) {
    fail('consistency', `the checkpoint of size ${small.size} is not a prefix of that of size ${large.size}: the log forked, or the proof is not theirs`)
  }
}

function checkSignedRequest(bundle: ReceiptBundle, leaf: SignalLeaf): NonNullable<VerifiedReceipt['signal']> {
  const r = bundle.request
  const s = bundle.salts
  if (r === undefined || s === undefined || typeof r !== 'object' || typeof s !== 'object') return fail('malformed_bundle', 'a whole bundle has both request and salts')
  for (const f of ['method', 'path', 'timestamp', 'nonce', 'key_id'] as const) if (typeof r[f] !== 'string') fail('malformed_bundle', `request.${f} is not text`)
  const body = b64(r.body, 'request.body')
  const signature = b64(r.signature, 'request.signature', 64)
  const publicKey = b64(r.public_key, 'request.public_key', 32)
  const salts = Object.fromEntries(COMMITTED_FIELDS.map((f) => [f, b64(s[f], `salts.${f}`, SALT_BYTES)])) as Record<CommittedField, Uint8Array>
  const committed = (f: CommittedField, value: Uint8Array) => equal(commitment(sha256, salts[f], value), leaf.commitments[f])

  const bodyHex = toHex(sha256(body))
  let payload: Record<string, unknown>
  try {
    payload = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(body)) as Record<string, unknown>
  } catch (err) {
    return fail('body_hash', 'the body is not the UTF-8 JSON of a signal', err)
  }
  const signalId = payload.signal_id
  const note = payload.note === undefined ? null : payload.note
  if (typeof signalId !== 'string' || (note !== null && typeof note !== 'string')) return fail('body_hash', 'the body holds no signal_id, or a note that is not text')
  const values = committedBytes({ signal_id: signalId, key_id: r.key_id, public_key: publicKey, note, method: r.method, path: r.path, timestamp: r.timestamp, nonce: r.nonce, body, signature })
  if (!committed('body', values.body)) fail('body_hash', 'the body does not match the leaf\'s body commitment')
  let signed = false
  try {
    signed = ed.verify(signature, new TextEncoder().encode(signingString(r.method, r.path, r.timestamp, r.nonce, bodyHex)), publicKey)
  } catch {
    signed = false
  }
  if (!signed) fail('creator_signature', 'the creator\'s signature does not verify over the request with the given public key')
  for (const f of ['signature', 'key', 'request', 'signal_id', 'note'] as const) if (!committed(f, values[f])) fail('leaf', `the leaf's ${f} commitment does not match the bundle`)
  const emitted = typeof payload.ts === 'string' ? Date.parse(payload.ts) : Number.NaN
  const same =
    payload.source_id === leaf.source_id &&
    payload.token === leaf.token &&
    payload.severity === leaf.severity &&
    (payload.confidence ?? null) === leaf.confidence &&
    emitted === Date.parse(leaf.emitted_at)
  if (!same) fail('leaf', 'the leaf\'s clear fields (source, token, severity, confidence, emission time) do not match the body')
  return { signal_id: signalId, key_id: r.key_id, note }
}
