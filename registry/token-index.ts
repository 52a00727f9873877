import { createHash, timingSafeEqual } from 'node:crypto'
import { OrderedRecords } from './ordered-records.js'
import { MAX_TOKEN_CHARS, type Principal, type TokenRecord } from './records.js'

export const sha256 = (s: string): Buffer => createHash('sha256').update(s).digest()

/**
 * Bearer tokens as this process knows them from the registry bucket: the creator,
 * renter, metrics and scorer tokens the admin issues, kept only as their SHA-256. The
 * admin token is no record: it is the process's configuration, held here only as its
 * hash, so that every process authenticates it alike whether or not any process ever
 * wrote to the bucket.
 */
export class TokenIndex {
  readonly #adminHash: Buffer
  readonly #records = new OrderedRecords<TokenRecord>()
  /** The tokens that authenticate, by the SHA-256 of the token. */
  readonly #live = new Map<string, TokenRecord>()
  /** Revoked token ids. */
  readonly #revoked = new Set<string>()
  /** created_at of the newest token: a new one is never older. */
  #lastCreatedAt = ''

  constructor(adminToken: string) {
    this.#adminHash = sha256(adminToken)
  }

  /**
   * Maps a bearer token to its principal. The admin token is compared in constant
   * time; other tokens are found by their SHA-256, so a timing difference in the map
   * look-up can only reveal bits of a hash, never of a token.
   */
  authenticate(token: string): Principal | undefined {
    if (token.length === 0 || token.length > MAX_TOKEN_CHARS) return undefined
    const digest = sha256(token)
    if (timingSafeEqual(digest, this.#adminHash)) return { role: 'admin', subject: 'admin', tokenId: null }
    const record = this.#live.get(digest.toString('hex'))
    return record === undefined ? undefined : { role: record.role, subject: record.subject, tokenId: record.token_id }
  }

  /** Whether the token `principal` authenticated with still does: a request that outlives a revocation asks again. */
  stillAuthenticated(principal: Principal): boolean {
    return principal.tokenId === null || this.#records.get(principal.tokenId)?.revoked_at === null
  }

  get(tokenId: string): TokenRecord | undefined {
    return this.#records.get(tokenId)
  }

  /** Oldest first. */
  records(): readonly TokenRecord[] {
    return this.#records.list()
  }

  get live(): number {
    return this.#live.size
  }

  get revoked(): number {
    return this.#revoked.size
  }

  get lastCreatedAt(): string {
    return this.#lastCreatedAt
  }

  /** The `n` revoked records revoked first (ties by the listing order). */
  oldestRevoked(n: number): TokenRecord[] {
    const revoked = [...this.#revoked].map((id) => this.#records.get(id) as TokenRecord)
    revoked.sort((a, b) => ((a.revoked_at as string) < (b.revoked_at as string) ? -1 : (a.revoked_at as string) > (b.revoked_at as string) ? 1 : 0))
    return revoked.slice(0, n)
  }

  /** Takes a stored record; true if it revokes a token this index held as live. */
  put(record: TokenRecord, order: number): boolean {
    const held = this.#records.get(record.token_id)
    this.#records.set(record.token_id, record, record.created_at, order)
    if (record.created_at > this.#lastCreatedAt) this.#lastCreatedAt = record.created_at
    if (record.revoked_at === null) {
      this.#live.set(record.sha256, record)
      this.#revoked.delete(record.token_id)
      return false
    }
    this.#live.delete(record.sha256)
    this.#revoked.add(record.token_id)
    return held !== undefined && held.revoked_at === null
  }

  remove(tokenId: string): void {
    const held = this.#records.get(tokenId)
    if (held === undefined) return
    this.#records.delete(tokenId)
    this.#live.delete(held.sha256)
    this.#revoked.delete(tokenId)
  }
}
