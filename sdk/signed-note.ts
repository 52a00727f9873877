import * as ed from '@noble/ed25519'
import { sha256 } from '@noble/hashes/sha2.js'
import { sha512 } from '@noble/hashes/sha2.js'
import { fromBase64, toHex, utf8Bytes } from './bytes.js'

// noble's synchronous verify needs a SHA-512 (see signer-noble.ts); set only if unset.
ed.hashes.sha512 ??= sha512

/**
 * C2SP signed notes (c2sp.org/signed-note) and tlog checkpoints (c2sp.org/tlog-checkpoint),
 * verified offline with Ed25519 verifier keys `<name>+<key id hex>+<base64 of 0x01 || key>`.
 */

export class NoteError extends Error {
  readonly code: 'invalid_key' | 'malformed_note' | 'unverified_note' | 'invalid_checkpoint'
  constructor(code: NoteError['code'], message: string) {
    super(message)
    this.name = 'NoteError'
    this.code = code
  }
}

export interface NoteVerifierKey {
  readonly name: string
  /** The 4-byte key id. */
  readonly keyId: Uint8Array
  /** The 32 raw bytes of the Ed25519 public key. */
  readonly publicKey: Uint8Array
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i])

/** The key id of an Ed25519 key: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || key). */
export function noteKeyId(name: string, publicKey: Uint8Array): Uint8Array {
  const n = utf8Bytes(name)
  const input = new Uint8Array(n.length + 2 + publicKey.length)
  input.set(n)
  input.set([0x0a, 0x01], n.length)
  input.set(publicKey, n.length + 2)
  return sha256(input).subarray(0, 4)
}

/** Parses a verifier key; NoteError `invalid_key` for one that is not a well-formed Ed25519 key whose id matches. */
export function parseVerifierKey(text: string): NoteVerifierKey {
  const bad = (why: string): never => {
    throw new NoteError('invalid_key', `not a signed-note verifier key: ${why}`)
  }
  const first = text.indexOf('+')
  const second = first < 0 ? -1 : text.indexOf('+', first + 1)
  if (first <= 0 || second < 0) bad('it is not name+id+key')
  const name = text.slice(0, first)
  const idHex = text.slice(first + 1, second)
  if (/[\s+]/.test(name) || /[\u0000-\u001f]/.test(name)) bad('the name holds a space, a plus or a control character')
  if (!/^[0-9a-f]{8}$/.test(idHex)) bad('the key id is not 8 lowercase hex digits')
  const keyText = text.slice(second + 1)
  const key = /^[A-Za-z0-9+/]+=*$/.test(keyText) ? fromBase64(keyText) : undefined
  if (key === undefined || key.length !== 33 || key[0] !== 0x01) bad('the key is not base64 of 0x01 and 32 bytes')
  const publicKey = key!.slice(1)
  const keyId = noteKeyId(name, publicKey)
  if (toHex(keyId) !== idHex) bad('the key id does not match the name and key')
  return { name, keyId, publicKey }
}

export interface NoteSignature {
  readonly name: string
  readonly keyId: Uint8Array
  readonly signature: Uint8Array
}

export interface OpenedNote {
  /** The signed text, its final line feed included. */
  readonly text: string
  /** Every signature line, known key or not. */
  readonly signatures: readonly NoteSignature[]
  /** The keys (of those given) whose signature verified. */
  readonly verifiedBy: readonly NoteVerifierKey[]
}

/**
 * Splits a note and checks its signatures against `keys`: valid when at least one of them
 * signed it. A signature by one of the keys that does not verify refuses the note (it was
 * altered); signatures of keys not given are passed over.
 */
export function openNote(note: string, keys: readonly NoteVerifierKey[]): OpenedNote {
  const malformed = (why: string): never => {
    throw new NoteError('malformed_note', `not a signed note: ${why}`)
  }
  if (/[\u0000-\u0009\u000b-\u001f]/.test(note)) malformed('it holds a control character')
  const split = note.lastIndexOf('\n\n')
  if (split < 0 || !note.endsWith('\n')) malformed('no empty line before the signatures')
  const text = note.slice(0, split + 1)
  const signatures: NoteSignature[] = []
  for (const line of note.slice(split + 2, -1).split('\n')) {
    const m = /^— (\S+) ([A-Za-z0-9+/]+=*)$/.exec(line)
    const blob = m === null ? undefined : fromBase64(m[2]!)
    if (m === null || blob === undefined || blob.length < 5) return malformed(`a signature line is not "— name base64"`)
    signatures.push({ name: m[1]!, keyId: blob.slice(0, 4), signature: blob.slice(4) })
  }
  if (signatures.length === 0) malformed('no signature line')
  const message = utf8Bytes(text)
  const verifiedBy: NoteVerifierKey[] = []
  for (const s of signatures) {
    const key = keys.find((k) => k.name === s.name && equal(k.keyId, s.keyId))
    if (key === undefined) continue
    let ok = false
    try {
      ok = s.signature.length === 64 && ed.verify(s.signature, message, key.publicKey)
    } catch {
      ok = false
    }
    if (!ok) throw new NoteError('unverified_note', `the signature of ${s.name} does not verify`)
    if (!verifiedBy.includes(key)) verifiedBy.push(key)
  }
  if (verifiedBy.length === 0) throw new NoteError('unverified_note', 'no signature of a known key')
  return { text, signatures, verifiedBy }
}

export interface Checkpoint {
  readonly origin: string
  readonly size: number
  /** The 32-byte root hash. */
  readonly rootHash: Uint8Array
  /** Extension lines after the root, if any. */
  readonly extensions: readonly string[]
}

/** Parses a checkpoint's text (the note's signed part). */
export function parseCheckpointText(text: string): Checkpoint {
  const lines = text.split('\n')
  const bad = (why: string): never => {
    throw new NoteError('invalid_checkpoint', `not a tlog checkpoint: ${why}`)
  }
  if (lines.length < 4 || lines[lines.length - 1] !== '') bad('fewer than three lines')
  const [origin, sizeText, rootText] = lines as [string, string, string]
  if (origin === '') bad('an empty origin')
  if (!/^(0|[1-9][0-9]{0,15})$/.test(sizeText) || !Number.isSafeInteger(Number(sizeText))) bad('the size is not a decimal whole number')
  const rootHash = /^[A-Za-z0-9+/]{43}=$/.test(rootText) ? fromBase64(rootText) : undefined
  if (rootHash === undefined || rootHash.length !== 32) return bad('the root is not base64 of 32 bytes')
  return { origin, size: Number(sizeText), rootHash, extensions: lines.slice(3, -1) }
}

/** Opens a checkpoint note with `keys` and parses it; its origin must be the keys' name (the log's identity). */
export function verifyCheckpoint(note: string, keys: readonly NoteVerifierKey[]): Checkpoint & { readonly note: string } {
  const opened = openNote(note, keys)
  const cp = parseCheckpointText(opened.text)
  if (!opened.verifiedBy.some((k) => k.name === cp.origin)) throw new NoteError('unverified_note', `no signature of a key named after the origin ${cp.origin}`)
  return { ...cp, note }
}
