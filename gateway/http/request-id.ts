import { randomFillSync } from 'node:crypto'

/** Random bytes per id: 96 bits, so ids stay unique across restarts and processes without coordination. */
const ID_BYTES = 12
/** Random bytes drawn at once, so the hot path makes one draw per 340 requests. */
const pool = Buffer.alloc(ID_BYTES * 340)
let offset = pool.length

/**
 * Request ids: random, not a counter. A counter (even behind a random prefix) let anyone
 * who asked twice read off how many requests the gateway served in between.
 */
export function nextRequestId(): string {
  if (offset === pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const id = `req_${pool.toString('base64url', offset, offset + ID_BYTES)}`
  offset += ID_BYTES
  return id
}
