import { verifyEd25519 } from './ed25519.js'
import type { VerifyBatch } from './verify-batch.js'

/**
 * Verifies one batch inside a worker thread. The batch arrives as flat buffers
 * (moved, not copied) because per-message overhead between threads costs about as
 * much as one verification (measured on this project's 2-core machine).
 */
export default function verifyBatch(batch: VerifyBatch): Uint8Array {
  const results = new Uint8Array(batch.count)
  const keys = new Uint8Array(batch.keys)
  const signatures = new Uint8Array(batch.signatures)
  const messages = new Uint8Array(batch.messages)
  let offset = 0
  for (let i = 0; i < batch.count; i++) {
    const end = batch.messageEnds[i] as number
    results[i] = verifyEd25519(
      keys.subarray(i * 32, i * 32 + 32),
      messages.subarray(offset, end),
      signatures.subarray(i * 64, i * 64 + 64),
    )
      ? 1
      : 0
    offset = end
  }
  return results
}
