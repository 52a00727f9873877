import { createHash, sign, type KeyObject } from 'node:crypto'

/**
 * Checkpoints as C2SP signed notes (c2sp.org/signed-note, c2sp.org/tlog-checkpoint), Ed25519
 * keys only. A checkpoint's text is three lines, each ending in a line feed: the origin,
 * the tree size in decimal, the root hash in base64. The note is the text, an empty line,
 * and one signature line per key: "— " (U+2014, a space), the key name, a space, and
 * base64 of the key's 4-byte id followed by the 64-byte signature of the text.
 *
 * A key's id is the first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key), 0x01
 * naming Ed25519; its verifier key, the string readers configure, is
 * `<name>+<id in hex>+<base64 of 0x01 || public key>`.
 */

const ED25519 = 0x01

export function checkpointText(origin: string, size: number, root: Uint8Array): string {
  return `${origin}\n${size}\n${Buffer.from(root).toString('base64')}\n`
}

export function noteKeyId(name: string, publicKey: Uint8Array): Buffer {
  return createHash('sha256').update(name, 'utf8').update(Uint8Array.of(0x0a, ED25519)).update(publicKey).digest().subarray(0, 4)
}

export function verifierKey(name: string, publicKey: Uint8Array): string {
  return `${name}+${noteKeyId(name, publicKey).toString('hex')}+${Buffer.concat([Uint8Array.of(ED25519), publicKey]).toString('base64')}`
}

export interface NoteSigner {
  readonly name: string
  /** The 32 raw bytes. */
  readonly publicKey: Uint8Array
  readonly privateKey: KeyObject
}

/** The signed note of `text` (which ends in a line feed): one signature line per signer, in the order given. */
export function signNote(text: string, signers: readonly NoteSigner[]): string {
  if (!text.endsWith('\n')) throw new RangeError('a note text ends in a line feed')
  const message = Buffer.from(text, 'utf8')
  const lines = signers.map((s) => `— ${s.name} ${Buffer.concat([noteKeyId(s.name, s.publicKey), sign(null, message, s.privateKey)]).toString('base64')}\n`)
  return `${text}\n${lines.join('')}`
}
