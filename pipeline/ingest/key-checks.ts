import { ApiError, isWithinSkew } from '../../schemas/index.js'
import type { LiveKey, SourceRecord } from '../../registry/index.js'

/**
 * The checks of a request's key and clock that the edge makes on the head, before any
 * cryptography, and the pipeline makes again after verification: a key may be revoked,
 * and the clock may pass the 300 s skew, while a request waits for a worker.
 */

/** A revoked key signs nothing, from the moment it is revoked (revocation is forward-only and immediate). */
export function revokedKeyRefusal(key: LiveKey): ApiError | undefined {
  return key.record.state === 'revoked' ? new ApiError('revoked_key', 'the signing key is revoked') : undefined
}

/** The key not revoked, then the request timestamp (X-Svc-Timestamp) within 300 s of `nowMs` either way. */
export function keyOrClockRefusal(key: LiveKey, requestTimeMs: number, nowMs: number): ApiError | undefined {
  const revoked = revokedKeyRefusal(key)
  if (revoked !== undefined) return revoked
  if (!isWithinSkew(nowMs, requestTimeMs)) return new ApiError('stale_timestamp', 'X-Svc-Timestamp is more than 300 seconds from the server clock')
  return undefined
}

/** An unknown source and an unknown key look the same, so ids cannot be probed. */
export function unknownKeyRefusal(): ApiError {
  return new ApiError('unknown_key', 'no such key for this source')
}

/**
 * A retired source takes nothing more, from the moment it is retired: a request that
 * passed the edge before then gets the refusal of a source that does not exist.
 */
export function retiredSourceRefusal(source: SourceRecord): ApiError | undefined {
  return source.retired_at === null ? undefined : unknownKeyRefusal()
}
