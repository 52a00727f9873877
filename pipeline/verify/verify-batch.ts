/** The message a verify worker receives: `count` triples packed into flat buffers. */
export interface VerifyBatch {
  readonly count: number
  /** count × 32 bytes. */
  readonly keys: ArrayBuffer
  /** count × 64 bytes. */
  readonly signatures: ArrayBuffer
  /** The signing strings back to back; `messageEnds[i]` is where the i-th ends. */
  readonly messages: ArrayBuffer
  readonly messageEnds: Uint32Array
}

export interface VerifyItem {
  readonly publicKey: Uint8Array
  readonly message: Uint8Array
  readonly signature: Uint8Array
}

export function packBatch(items: readonly VerifyItem[]): VerifyBatch {
  const count = items.length
  const keys = new Uint8Array(count * 32)
  const signatures = new Uint8Array(count * 64)
  const messageEnds = new Uint32Array(count)
  let total = 0
  for (const item of items) total += item.message.length
  const messages = new Uint8Array(total)
  let offset = 0
  items.forEach((item, i) => {
    keys.set(item.publicKey.subarray(0, 32), i * 32)
    signatures.set(item.signature.subarray(0, 64), i * 64)
    messages.set(item.message, offset)
    offset += item.message.length
    messageEnds[i] = offset
  })
  return { count, keys: keys.buffer, signatures: signatures.buffer, messages: messages.buffer, messageEnds }
}
