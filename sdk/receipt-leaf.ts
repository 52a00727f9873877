import { utf8Bytes } from './bytes.js'

/**
 * The receipt log's leaf format, version 1: the exact bytes whose hash, SHA-256(0x00 ||
 * leaf), is a leaf of the log's Merkle tree. The service encodes leaves with this module
 * and verifiers rebuild them with it, so there is one definition. The format never changes
 * once a leaf is logged (tiles are immutable); a new format takes a new version byte.
 *
 * Layout (integers big-endian; `str` is a u16 byte length and that many UTF-8 bytes;
 * `hash` is 32 bytes):
 *
 *   leaf         = version (0x01) || kind || fields
 *   signal leaf  = kind 0x01 || str receipt_id || str source_id || str received_at
 *                  || str emitted_at || str token || str severity || str confidence
 *                  || hash signal_id || hash key || hash note || hash request
 *                  || hash body || hash signature
 *   dispute leaf = kind 0x02 || str source_id || str dispute_id || str resolved_at
 *                  || u16 count || count × str receipt_id
 *   outcome leaf = kind 0x03 || str receipt_id || str outcome || str window_start
 *                  || str window_end || str baseline || str scored_at
 *
 * An outcome leaf is a scorer's verdict that changed a receipt: `outcome` is hit, miss or
 * void, the times are ISO 8601 UTC with milliseconds (`2030-01-31T12:00:00.000Z`) and
 * `baseline` is the number's shortest round-trip decimal (JavaScript's String(n): `1.5`,
 * `-0.25`, `1e+21`). Every field of it is in a receipt's public view but scored_at, which
 * is no secret, so it carries no commitment.
 *
 * `confidence` is its decimal digits, or empty when the signal had none. The six `hash`
 * fields are salted commitments, SHA-256(salt || value), each with its own 16-byte random
 * salt, so a reader without the salts learns nothing of what the public view hides (a
 * signal id is often guessable: without the salt, its hash would give it away). The
 * committed values:
 *
 *   signal_id  the signal id's UTF-8 bytes
 *   key        the key id's UTF-8 bytes || 0x0A || the 32 raw bytes of its public key
 *   note       0x00 when the signal had no note; 0x01 || its UTF-8 bytes otherwise
 *   request    UTF-8 of method "\n" path "\n" X-Svc-Timestamp "\n" X-Svc-Nonce
 *   body       the exact request body bytes the creator signed
 *   signature  the 64 bytes of the creator's Ed25519 signature
 */

export const LEAF_VERSION = 1
export const LEAF_KIND = { signal: 1, dispute: 2, outcome: 3 } as const
export const SALT_BYTES = 16
export const COMMITTED_FIELDS = ['signal_id', 'key', 'note', 'request', 'body', 'signature'] as const
export type CommittedField = (typeof COMMITTED_FIELDS)[number]

/** What a signal leaf shows in clear: the public view's fields. */
export interface SignalLeafClear {
  readonly receipt_id: string
  readonly source_id: string
  readonly received_at: string
  readonly emitted_at: string
  readonly token: string
  readonly severity: string
  readonly confidence: number | null
}

export interface SignalLeaf extends SignalLeafClear {
  readonly kind: 'signal'
  readonly commitments: Readonly<Record<CommittedField, Uint8Array>>
}

export interface DisputeLeaf {
  readonly kind: 'dispute'
  readonly source_id: string
  readonly dispute_id: string
  readonly resolved_at: string
  readonly receipt_ids: readonly string[]
}

export interface OutcomeLeaf {
  readonly kind: 'outcome'
  readonly receipt_id: string
  readonly outcome: 'hit' | 'miss' | 'void'
  readonly window_start: string
  readonly window_end: string
  readonly baseline: number
  readonly scored_at: string
}

export type ReceiptLogLeaf = SignalLeaf | DisputeLeaf | OutcomeLeaf

const LEAF_OUTCOMES: readonly string[] = ['hit', 'miss', 'void']

/** The values a signal's commitments are over (see the module's comment). */
export interface CommittedValues {
  readonly signal_id: string
  readonly key_id: string
  /** The 32 raw bytes. */
  readonly public_key: Uint8Array
  readonly note: string | null
  readonly method: string
  readonly path: string
  readonly timestamp: string
  readonly nonce: string
  readonly body: Uint8Array
  /** The 64 raw bytes. */
  readonly signature: Uint8Array
}

const concat = (parts: readonly Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.length
  }
  return out
}

/** The bytes each commitment is over. */
export function committedBytes(v: CommittedValues): Record<CommittedField, Uint8Array> {
  return {
    signal_id: utf8Bytes(v.signal_id),
    key: concat([utf8Bytes(v.key_id), Uint8Array.of(0x0a), v.public_key]),
    note: v.note === null ? Uint8Array.of(0) : concat([Uint8Array.of(1), utf8Bytes(v.note)]),
    request: utf8Bytes(`${v.method}\n${v.path}\n${v.timestamp}\n${v.nonce}`),
    body: v.body,
    signature: v.signature,
  }
}

/** SHA-256(salt || value): the caller brings the SHA-256 (node:crypto in the service, @noble/hashes in the SDK). */
export function commitment(sha256: (data: Uint8Array) => Uint8Array, salt: Uint8Array, value: Uint8Array): Uint8Array {
  return sha256(concat([salt, value]))
}

/** A leaf field that cannot be encoded: longer than a u16 length allows. */
export class LeafFormatError extends Error {
  readonly code = 'invalid_leaf'
  constructor(message: string) {
    super(message)
    this.name = 'LeafFormatError'
  }
}

function str(text: string): Uint8Array {
  const bytes = utf8Bytes(text)
  if (bytes.length > 0xffff) throw new LeafFormatError('a leaf text field is longer than 65535 bytes')
  return concat([Uint8Array.of(bytes.length >> 8, bytes.length & 0xff), bytes])
}

const u16 = (n: number): Uint8Array => Uint8Array.of(n >> 8, n & 0xff)

export function encodeLeaf(leaf: ReceiptLogLeaf): Uint8Array {
  if (leaf.kind === 'outcome') {
    if (!LEAF_OUTCOMES.includes(leaf.outcome)) throw new LeafFormatError('an outcome leaf\'s outcome is hit, miss or void')
    if (!Number.isFinite(leaf.baseline)) throw new LeafFormatError('an outcome leaf\'s baseline is a finite number')
    return concat([
      Uint8Array.of(LEAF_VERSION, LEAF_KIND.outcome),
      str(leaf.receipt_id),
      str(leaf.outcome),
      str(leaf.window_start),
      str(leaf.window_end),
      str(String(leaf.baseline)),
      str(leaf.scored_at),
    ])
  }
  if (leaf.kind === 'dispute') {
    if (leaf.receipt_ids.length > 0xffff) throw new LeafFormatError('a dispute leaf names at most 65535 receipts')
    return concat([
      Uint8Array.of(LEAF_VERSION, LEAF_KIND.dispute),
      str(leaf.source_id),
      str(leaf.dispute_id),
      str(leaf.resolved_at),
      u16(leaf.receipt_ids.length),
      ...leaf.receipt_ids.map(str),
    ])
  }
  const parts: Uint8Array[] = [
    Uint8Array.of(LEAF_VERSION, LEAF_KIND.signal),
    str(leaf.receipt_id),
    str(leaf.source_id),
    str(leaf.received_at),
    str(leaf.emitted_at),
    str(leaf.token),
    str(leaf.severity),
    str(leaf.confidence === null ? '' : String(leaf.confidence)),
  ]
  for (const f of COMMITTED_FIELDS) {
    const c = leaf.commitments[f]
    if (c.length !== 32) throw new LeafFormatError(`commitment ${f} is not 32 bytes`)
    parts.push(c)
  }
  return concat(parts)
}

/** Reads a leaf back; throws LeafFormatError for bytes that are not a version 1 leaf, trailing bytes included. */
export function decodeLeaf(bytes: Uint8Array): ReceiptLogLeaf {
  let at = 0
  const fail = (why: string): never => {
    throw new LeafFormatError(`not a receipt log leaf: ${why}`)
  }
  const take = (n: number): Uint8Array => {
    if (at + n > bytes.length) fail('it ends early')
    const out = bytes.subarray(at, at + n)
    at += n
    return out
  }
  const decoder = new TextDecoder('utf-8', { fatal: true })
  const readU16 = () => {
    const b = take(2)
    return (b[0]! << 8) | b[1]!
  }
  const readStr = () => {
    try {
      return decoder.decode(take(readU16()))
    } catch (err) {
      if (err instanceof LeafFormatError) throw err
      return fail('a text field is not UTF-8')
    }
  }
  const [version, kind] = take(2)
  if (version !== LEAF_VERSION) fail(`version ${version}`)
  let leaf: ReceiptLogLeaf
  if (kind === LEAF_KIND.dispute) {
    const source_id = readStr()
    const dispute_id = readStr()
    const resolved_at = readStr()
    const count = readU16()
    const receipt_ids: string[] = []
    for (let i = 0; i < count; i++) receipt_ids.push(readStr())
    leaf = { kind: 'dispute', source_id, dispute_id, resolved_at, receipt_ids }
  } else if (kind === LEAF_KIND.outcome) {
    const receipt_id = readStr()
    const outcome = readStr()
    const window_start = readStr()
    const window_end = readStr()
    const baselineText = readStr()
    const scored_at = readStr()
    if (!LEAF_OUTCOMES.includes(outcome)) fail('an outcome is not hit, miss or void')
    const baseline = Number(baselineText)
    // One spelling per number: the text must be what encoding the number writes back.
    if (baselineText === '' || !Number.isFinite(baseline) || String(baseline) !== baselineText) fail('a baseline is not a number in its canonical form')
    leaf = { kind: 'outcome', receipt_id, outcome: outcome as OutcomeLeaf['outcome'], window_start, window_end, baseline, scored_at }
  } else if (kind === LEAF_KIND.signal) {
    const receipt_id = readStr()
    const source_id = readStr()
    const received_at = readStr()
    const emitted_at = readStr()
    const token = readStr()
    const severity = readStr()
    const conf = readStr()
    if (conf !== '' && !/^(0|[1-9][0-9]{0,2})$/.test(conf)) fail('confidence is not a whole number')
    const commitments = {} as Record<CommittedField, Uint8Array>
    for (const f of COMMITTED_FIELDS) commitments[f] = take(32)
    leaf = { kind: 'signal', receipt_id, source_id, received_at, emitted_at, token, severity, confidence: conf === '' ? null : Number(conf), commitments }
  } else {
    return fail(`kind ${kind}`)
  }
  if (at !== bytes.length) fail('trailing bytes')
  return leaf
}
