import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { ApiError } from '../schemas/index.js'
import type { ChangeSet } from './change-set.js'
import { REGISTRY_LIMITS } from './limits.js'
import { MAX_TOKEN_CHARS, newId, type Principal, type TokenRecord } from './records.js'

const sha256 = (s: string) => createHash('sha256').update(s).digest()

/**
 * Bearer tokens: the admin token, and the creator, renter, metrics and scorer tokens the admin issues.
 * A token is shown once and kept only as its SHA-256. Changes are made inside the
 * registry's change under way (`changes`), which records them or undoes them.
 */
export class TokenTable {
  readonly #changes: ChangeSet
  readonly #adminHash: Buffer
  /** Every token record by token id, oldest first. */
  readonly #records: Map<string, TokenRecord>
  /** The tokens that authenticate, by the SHA-256 of the token. */
  readonly #live: Map<string, TokenRecord>
  /** Revoked token ids, oldest revocation first. */
  readonly #revoked: Set<string>
  /** created_at of the newest token: a new one is never older. */
  #lastCreatedAt = ''

  constructor(changes: ChangeSet, adminToken: string, records: readonly TokenRecord[] = []) {
    this.#changes = changes
    this.#adminHash = sha256(adminToken)
    // Records written before tokens could be revoked have no revoked_at.
    for (const t of records) t.revoked_at ??= null
    this.#records = new Map(records.map((t) => [t.token_id, t]))
    for (const t of records) if (t.created_at > this.#lastCreatedAt) this.#lastCreatedAt = t.created_at
    this.#live = new Map(records.filter((t) => t.revoked_at === null).map((t) => [t.sha256, t]))
    const revoked = records.filter((t) => t.revoked_at !== null).sort((a, b) => ((a.revoked_at as string) < (b.revoked_at as string) ? -1 : 1))
    this.#revoked = new Set(revoked.map((t) => t.token_id))
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

  /** Inside a change. */
  create(role: TokenRecord['role'], subject: string, now: string): { token: string; record: TokenRecord } {
    if (this.#live.size >= REGISTRY_LIMITS.tokens) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.tokens} tokens: revoke one first`)
    const token = `sgw_${randomBytes(32).toString('base64url')}`
    // Never before the last token's, even if the clock steps back: token lists page by
    // this time once a cursor's token is dropped (gateway/control/paging.ts).
    const createdAt = now < this.#lastCreatedAt ? this.#lastCreatedAt : now
    this.#lastCreatedAt = createdAt
    const record: TokenRecord = { token_id: newId('tok'), sha256: sha256(token).toString('hex'), role, subject, created_at: createdAt, revoked_at: null }
    this.#changes.put(this.#records, record.token_id, record)
    this.#changes.put(this.#live, record.sha256, record)
    this.#changes.current.tokens.push(record)
    return { token, record }
  }

  /** Token records, oldest first; never the token, which is not kept. */
  records(): IterableIterator<TokenRecord> {
    return this.#records.values()
  }

  get(tokenId: string): TokenRecord | undefined {
    return this.#records.get(tokenId)
  }

  /** Inside a change. Forward-only and immediate: the next request with the token is refused. Revoking again changes nothing. */
  revoke(tokenId: string, now: string): TokenRecord {
    const record = this.#records.get(tokenId)
    if (record === undefined) throw new ApiError('not_found', 'no such token')
    if (record.revoked_at !== null) return record
    const change = this.#changes.current
    this.#changes.touch(record, change.tokens)
    record.revoked_at = now
    this.#live.delete(record.sha256)
    this.#revoked.add(tokenId)
    change.undo.push(() => {
      this.#live.set(record.sha256, record)
      this.#revoked.delete(tokenId)
    })
    this.#pruneRevoked()
    return record
  }

  /** Drops the oldest revoked token records past the bound. */
  #pruneRevoked(): void {
    for (const tokenId of this.#revoked) {
      if (this.#revoked.size <= REGISTRY_LIMITS.revokedTokens) return
      const record = this.#records.get(tokenId) as TokenRecord
      this.#records.delete(tokenId)
      this.#revoked.delete(tokenId)
      const change = this.#changes.current
      change.droppedTokens.push(tokenId)
      change.undo.push(() => {
        this.#records.set(tokenId, record)
        this.#revoked.add(tokenId)
      })
    }
  }
}
