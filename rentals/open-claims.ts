import { createHash } from 'node:crypto'
import { isKvError, isRevisionRace, writeOverRead, type KvBucket } from '../storage/index.js'
import { RENTAL_LIMITS } from './limits.js'
import { RentalError } from './rental-error.js'

/** A claim: a rental id and when it was claimed (ms). */
type Claim = [string, number]

/**
 * The bounds on open rentals per renter and per source, kept across processes. Counting
 * the index and then writing would let two processes (or two awaits in one) both pass
 * the count; instead each renter and each source has a claims document in the bucket,
 * and a new rental first adds its id there with an expected-revision update, which only
 * one of two racing writers wins. Claims whose rental has ended lapse on their own; a
 * claim whose rental record never appeared (a creation that failed halfway) lapses
 * after RENTAL_LIMITS.claimGraceMs.
 */
export class OpenClaims {
  readonly #bucket: KvBucket
  readonly #now: () => number
  /** Whether the claim still counts: its rental is open, or its creation may still be under way. */
  readonly #holds: (rentalId: string, claimedAt: number) => boolean

  constructor(bucket: KvBucket, now: () => number, holds: (rentalId: string, claimedAt: number) => boolean) {
    this.#bucket = bucket
    this.#now = now
    this.#holds = holds
  }

  static renterKey(renterId: string): string {
    // Renter ids may hold `:`, which a NATS key may not: a digest names it instead.
    return `claims.renter.${createHash('sha256').update(renterId).digest('base64url')}`
  }

  static sourceKey(sourceId: string): string {
    return `claims.source.${createHash('sha256').update(sourceId).digest('base64url')}`
  }

  /** Adds `rentalId` to the claims under `key`, or throws limit_exceeded if `limit` claims hold. */
  async claim(key: string, rentalId: string, limit: number, what: string): Promise<void> {
    await this.#change(key, (claims) => {
      if (claims.length >= limit) throw new RentalError('limit_exceeded', `${what} has ${limit} open rentals, the most allowed; end one first`)
      return [...claims, [rentalId, this.#now()]]
    })
  }

  /** Takes a claim back after the rental could not be created. Best effort: it lapses anyway. */
  async release(key: string, rentalId: string): Promise<void> {
    await this.#change(key, (claims) => claims.filter(([id]) => id !== rentalId)).catch(() => undefined)
  }

  /** Deletes the document under `key` if no claim in it holds any more; for the sweep that keeps the bucket small. */
  async dropIfLapsed(key: string): Promise<void> {
    const entry = await this.#bucket.get(key)
    if (entry === null || this.#live(entry.value).length > 0) return
    await this.#bucket.delete(key, { revision: entry.revision }).catch((err: unknown) => {
      if (!isKvError(err, 'wrong_revision')) throw err
    })
  }

  #live(value: Uint8Array | undefined): Claim[] {
    if (value === undefined) return []
    let claims: unknown
    try {
      claims = JSON.parse(Buffer.from(value).toString('utf8'))
    } catch {
      return []
    }
    if (!Array.isArray(claims)) return []
    return (claims as Claim[]).filter((c) => Array.isArray(c) && typeof c[0] === 'string' && typeof c[1] === 'number' && this.#holds(c[0], c[1]))
  }

  async #change(key: string, next: (live: Claim[]) => Claim[]): Promise<void> {
    for (let attempt = 0; attempt < RENTAL_LIMITS.writeAttempts; attempt++) {
      const entry = await this.#bucket.get(key)
      const value = Buffer.from(JSON.stringify(next(this.#live(entry?.value))))
      try {
        await writeOverRead(this.#bucket, key, entry, value)
        return
      } catch (err) {
        // Another writer got there first: read its claims and decide again.
        if (isRevisionRace(err)) continue
        throw err
      }
    }
    throw new RentalError('busy', 'too many rentals are being created for the same renter or source at once; retry')
  }
}
