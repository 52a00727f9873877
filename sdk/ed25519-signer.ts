/** Which implementation signs: the runtime's WebCrypto, or @noble/ed25519 in JavaScript. */
export type Ed25519Backend = 'webcrypto' | 'noble'

/**
 * An Ed25519 private key that can sign. Ed25519 signatures are deterministic, so both
 * backends give the same 64 bytes for the same key and message.
 */
export interface Ed25519Signer {
  readonly backend: Ed25519Backend
  sign(message: Uint8Array): Promise<Uint8Array>
}
