import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { ApiError } from '../schemas/api-error.js'
import type { Listing, Manifest } from '../schemas/manifest.js'
import { MAX_TOKEN_CHARS } from './records.js'
import { DISPUTE_LIMITS, Disputes } from './disputes.js'
import type { AgentRecord, DisputedSignal, DisputeRecord, KeyRecord, Principal, RegistrySnapshot, RetiredKey, SourceRecord, TokenRecord } from './records.js'
import type { RegistryChange, RegistryStore } from './registry-store.js'
import { RETIRED_KEYS_PER_SOURCE, RetiredKeys } from './retired-keys.js'

/** Bounds on what the registry holds: tokens and agents in all, slots per agent, keys per source. */
export const REGISTRY_LIMITS = {
  /** Tokens that authenticate. */
  tokens: 100_000,
  /**
   * Revoked token records kept, so a revocation can be read back and repeated; past
   * this the oldest is dropped (its hash goes with it, so it still authenticates nobody).
   */
  revokedTokens: 10_000,
  agents: 100_000,
  slotsPerAgent: 1000,
  /** Sources in all: agents times slots alone would allow 100 million. */
  sources: 100_000,
  /** Keys that can still sign (pending, active, grace). */
  liveKeysPerSource: 32,
  /**
   * Revoked keys kept per source, so a request signed with one is told `revoked_key`.
   * Past this, the oldest revoked record is dropped and only its fingerprint is kept, so
   * the public key still cannot be registered again: rotation must never run into a
   * wall (spec 5.3), and the registry stays bounded (a year of weekly rotations fits;
   * 96 records at most per source, about 50 KB in memory).
   */
  revokedKeysPerSource: 64,
  /** Fingerprints of dropped revoked keys kept per source. */
  retiredKeysPerSource: RETIRED_KEYS_PER_SOURCE,
} as const

/** The change being made: what to record, and how to undo it in memory if recording fails. */
interface PendingChange extends RegistryChange {
  readonly retiredKeys: RetiredKey[]
  readonly disputes: DisputeRecord[]
  readonly undo: Array<() => void>
}

const sha256Hex = (s: string) => createHash('sha256').update(s).digest('hex')
const newId = (prefix: string) => `${prefix}_${randomBytes(12).toString('base64url')}`

/**
 * Ids grouped by the id of what owns them (keys by source, sources by agent), so that
 * listing one owner's records costs that owner's records, not the whole registry.
 */
class OwnerIndex {
  readonly #groups = new Map<string, Set<string>>()

  add(owner: string, id: string): void {
    let group = this.#groups.get(owner)
    if (group === undefined) this.#groups.set(owner, (group = new Set()))
    group.add(id)
  }

  delete(owner: string, id: string): void {
    const group = this.#groups.get(owner)
    if (group === undefined) return
    group.delete(id)
    if (group.size === 0) this.#groups.delete(owner)
  }

  of(owner: string): ReadonlySet<string> {
    return this.#groups.get(owner) ?? EMPTY
  }
}

const EMPTY: ReadonlySet<string> = new Set()

/** A key as the hot path needs it: the record plus the decoded public key. */
export interface LiveKey {
  readonly record: KeyRecord
  readonly publicKey: Uint8Array
}

/**
 * Control-plane state: tokens, agents, sources and keys. Reads are synchronous
 * map look-ups (the ingest hot path asks for a key on every request); every change
 * is persisted through the store before the promise resolves, one at a time, so the
 * file never lags what a client was told.
 */
export class Registry {
  readonly #store: RegistryStore
  readonly #adminHash: Buffer
  readonly #now: () => number
  /** Every token record by token id, oldest first. */
  #tokens = new Map<string, TokenRecord>()
  /** The tokens that authenticate, by the SHA-256 of the token. */
  #liveTokens = new Map<string, TokenRecord>()
  /** created_at of the newest token: a new one is never older. */
  #lastTokenCreatedAt = ''
  /** Revoked token ids, oldest revocation first. */
  #revokedTokens = new Set<string>()
  #agents = new Map<string, AgentRecord>()
  #sources = new Map<string, SourceRecord>()
  #keys = new Map<string, LiveKey>()
  #sourcesByAgent = new OwnerIndex()
  #keysBySource = new OwnerIndex()
  #retiredKeys = new RetiredKeys()
  #disputes = new Disputes()
  #chain: Promise<unknown> = Promise.resolve()
  /** Set while a change runs: the mutations below note in it what they touch. */
  #pending: PendingChange | undefined
  readonly #inFlight = new Map<string, Promise<void>>()
  /** Keys whose promotion is made in memory but not yet recorded. */
  readonly #promoting = new Set<string>()

  private constructor(store: RegistryStore, adminToken: string, now: () => number) {
    this.#store = store
    this.#adminHash = createHash('sha256').update(adminToken).digest()
    this.#now = now
  }

  static async open(store: RegistryStore, adminToken: string, now: () => number = Date.now): Promise<Registry> {
    const registry = new Registry(store, adminToken, now)
    const snapshot = await store.load()
    if (snapshot !== undefined) registry.#load(snapshot)
    return registry
  }

  #load(snapshot: RegistrySnapshot): void {
    // Records written before tokens could be revoked have no revoked_at.
    for (const t of snapshot.tokens) t.revoked_at ??= null
    this.#tokens = new Map(snapshot.tokens.map((t) => [t.token_id, t]))
    for (const t of snapshot.tokens) if (t.created_at > this.#lastTokenCreatedAt) this.#lastTokenCreatedAt = t.created_at
    this.#liveTokens = new Map(snapshot.tokens.filter((t) => t.revoked_at === null).map((t) => [t.sha256, t]))
    const revoked = snapshot.tokens.filter((t) => t.revoked_at !== null).sort((a, b) => ((a.revoked_at as string) < (b.revoked_at as string) ? -1 : 1))
    this.#revokedTokens = new Set(revoked.map((t) => t.token_id))
    this.#agents = new Map(snapshot.agents.map((a) => [a.agent_id, a]))
    this.#sources = new Map(snapshot.sources.map((s) => [s.source_id, s]))
    this.#keys = new Map(snapshot.keys.map((k) => [k.key_id, { record: k, publicKey: Buffer.from(k.public_key, 'base64url') }]))
    this.#sourcesByAgent = new OwnerIndex()
    for (const s of snapshot.sources) this.#sourcesByAgent.add(s.agent_id, s.source_id)
    this.#keysBySource = new OwnerIndex()
    for (const k of snapshot.keys) this.#keysBySource.add(k.source_id, k.key_id)
    this.#retiredKeys = new RetiredKeys(snapshot.retired_keys)
    this.#disputes = new Disputes(snapshot.disputes)
  }

  #snapshot(): RegistrySnapshot {
    return {
      version: 1,
      tokens: [...this.#tokens.values()],
      agents: [...this.#agents.values()],
      sources: [...this.#sources.values()],
      keys: [...this.#keys.values()].map((k) => k.record),
      retired_keys: this.#retiredKeys.entries(),
      disputes: this.#disputes.all(),
    }
  }

  /**
   * Runs one change at a time and records it before resolving: only the records it
   * touched, so a change costs the same however large the registry is. If recording
   * fails the touched records are put back as they were, so memory never claims what
   * disk does not hold.
   */
  #mutate<T>(change: () => T): Promise<T> {
    const run = async () => {
      const pending: PendingChange = { tokens: [], agents: [], sources: [], keys: [], droppedKeys: [], droppedTokens: [], retiredKeys: [], disputes: [], undo: [] }
      this.#pending = pending
      let result: T
      try {
        result = change()
      } catch (err) {
        undo(pending)
        throw err
      } finally {
        this.#pending = undefined
      }
      if (pending.undo.length === 0) return result
      const { undo: _, ...recorded } = pending
      try {
        await this.#store.append(recorded, () => this.#snapshot())
      } catch (err) {
        undo(pending)
        throw err
      }
      return result
    }
    const next = this.#chain.then(run, run)
    this.#chain = next.catch(() => undefined)
    return next
  }

  #iso(): string {
    return new Date(this.#now()).toISOString()
  }

  /**
   * Maps a bearer token to its principal. The admin token is compared in constant
   * time; other tokens are found by their SHA-256, so a timing difference in the map
   * look-up can only reveal bits of a hash, never of a token.
   */
  authenticate(token: string): Principal | undefined {
    if (token.length === 0 || token.length > MAX_TOKEN_CHARS) return undefined
    const digest = createHash('sha256').update(token).digest()
    if (timingSafeEqual(digest, this.#adminHash)) return { role: 'admin', subject: 'admin', tokenId: null }
    const record = this.#liveTokens.get(digest.toString('hex'))
    return record === undefined ? undefined : { role: record.role, subject: record.subject, tokenId: record.token_id }
  }

  /** Whether the token `principal` authenticated with still does: a request that outlives a revocation asks again. */
  stillAuthenticated(principal: Principal): boolean {
    return principal.tokenId === null || this.#tokens.get(principal.tokenId)?.revoked_at === null
  }

  createToken(role: TokenRecord['role'], subject: string): Promise<{ token: string; record: TokenRecord }> {
    return this.#mutate(() => {
      if (this.#liveTokens.size >= REGISTRY_LIMITS.tokens) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.tokens} tokens: revoke one first`)
      const token = `sgw_${randomBytes(32).toString('base64url')}`
      // Never before the last token's, even if the clock steps back: token lists page by
      // this time once a cursor's token is dropped (gateway/control/paging.ts).
      const now = this.#iso()
      const createdAt = now < this.#lastTokenCreatedAt ? this.#lastTokenCreatedAt : now
      this.#lastTokenCreatedAt = createdAt
      const record: TokenRecord = { token_id: newId('tok'), sha256: sha256Hex(token), role, subject, created_at: createdAt, revoked_at: null }
      this.#put(this.#tokens, record.token_id, record)
      this.#put(this.#liveTokens, record.sha256, record)
      this.#change().tokens.push(record)
      return { token, record }
    })
  }

  /** Token records, oldest first; never the token, which is not kept. */
  tokens(): IterableIterator<TokenRecord> {
    return this.#tokens.values()
  }

  token(tokenId: string): TokenRecord | undefined {
    return this.#tokens.get(tokenId)
  }

  /** Forward-only and immediate: the next request with the token is refused. Revoking again changes nothing. */
  revokeToken(tokenId: string): Promise<TokenRecord> {
    return this.#mutate(() => {
      const record = this.#tokens.get(tokenId)
      if (record === undefined) throw new ApiError('not_found', 'no such token')
      if (record.revoked_at !== null) return record
      this.#touch(record, this.#change().tokens)
      record.revoked_at = this.#iso()
      this.#liveTokens.delete(record.sha256)
      this.#revokedTokens.add(tokenId)
      this.#change().undo.push(() => {
        this.#liveTokens.set(record.sha256, record)
        this.#revokedTokens.delete(tokenId)
      })
      this.#pruneRevokedTokens()
      return record
    })
  }

  /** Drops the oldest revoked token records past the bound. */
  #pruneRevokedTokens(): void {
    for (const tokenId of this.#revokedTokens) {
      if (this.#revokedTokens.size <= REGISTRY_LIMITS.revokedTokens) return
      const record = this.#tokens.get(tokenId) as TokenRecord
      this.#tokens.delete(tokenId)
      this.#revokedTokens.delete(tokenId)
      const change = this.#change()
      change.droppedTokens.push(tokenId)
      change.undo.push(() => {
        this.#tokens.set(tokenId, record)
        this.#revokedTokens.add(tokenId)
      })
    }
  }

  createAgent(input: { agent_id: string; creator_id: string; slots: number }): Promise<AgentRecord> {
    return this.#mutate(() => {
      if (this.#agents.has(input.agent_id)) throw new ApiError('already_exists', `agent ${input.agent_id} already exists`)
      if (this.#agents.size >= REGISTRY_LIMITS.agents) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.agents} agents`)
      const agent: AgentRecord = { ...input, created_at: this.#iso() }
      this.#put(this.#agents, agent.agent_id, agent)
      this.#change().agents.push(agent)
      return agent
    })
  }

  agent(agentId: string): AgentRecord | undefined {
    return this.#agents.get(agentId)
  }

  sourcesOfAgent(agentId: string): SourceRecord[] {
    return [...this.#sourcesByAgent.of(agentId)].map((id) => this.#sources.get(id) as SourceRecord)
  }

  /** Slots the agent's sources take. */
  slotsUsed(agentId: string): number {
    return this.#sourcesByAgent.of(agentId).size
  }

  /** Registers a source on one of the agent's open slots. */
  createSource(input: { agent: AgentRecord; manifest: Manifest; listing: Listing }): Promise<SourceRecord> {
    return this.#mutate(() => {
      if (this.slotsUsed(input.agent.agent_id) >= input.agent.slots) {
        throw new ApiError('no_open_slot', `agent ${input.agent.agent_id} has no open slot`)
      }
      if (this.#sources.size >= REGISTRY_LIMITS.sources) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.sources} sources: ask the operator`)
      const source: SourceRecord = {
        source_id: newId('src'),
        agent_id: input.agent.agent_id,
        creator_id: input.agent.creator_id,
        manifest: input.manifest,
        listing: input.listing,
        created_at: this.#iso(),
        flagged_for_review_at: null,
      }
      this.#put(this.#sources, source.source_id, source)
      this.#group(this.#sourcesByAgent, source.agent_id, source.source_id)
      this.#change().sources.push(source)
      return source
    })
  }

  source(sourceId: string): SourceRecord | undefined {
    return this.#sources.get(sourceId)
  }

  /** Marks a source for review after sustained over-rate; idempotent. */
  flagSource(sourceId: string): Promise<void> {
    return this.#once(`flag\n${sourceId}`, () => {
      const source = this.#sources.get(sourceId)
      if (source === undefined || source.flagged_for_review_at !== null) return
      this.#touch(source, this.#change().sources)
      source.flagged_for_review_at = this.#iso()
    })
  }

  /**
   * A change that many requests may ask for at once (flag a source, mark a key tested):
   * callers that ask while it is in flight share it, so a flood of 429s or of test
   * signals writes the registry file once, not once per request.
   */
  #once(what: string, change: () => void): Promise<void> {
    const running = this.#inFlight.get(what)
    if (running !== undefined) return running
    const done = this.#mutate(change).finally(() => this.#inFlight.delete(what))
    this.#inFlight.set(what, done)
    return done
  }

  keysOf(sourceId: string): KeyRecord[] {
    return [...this.#keysBySource.of(sourceId)].map((id) => (this.#keys.get(id) as LiveKey).record)
  }

  /** The key `keyId` if it belongs to `sourceId`; a key of another source is unknown here. */
  key(sourceId: string, keyId: string): LiveKey | undefined {
    const key = this.#keys.get(keyId)
    return key !== undefined && key.record.source_id === sourceId ? key : undefined
  }

  /** Spec 3.1: every new key starts pending. */
  addKey(sourceId: string, publicKey: Uint8Array): Promise<KeyRecord> {
    return this.#mutate(() => {
      const encoded = Buffer.from(publicKey).toString('base64url')
      const existing = this.keysOf(sourceId)
      const live = existing.filter((k) => k.state !== 'revoked')
      if (live.length >= REGISTRY_LIMITS.liveKeysPerSource) {
        throw new ApiError('limit_exceeded', `a source holds at most ${REGISTRY_LIMITS.liveKeysPerSource} keys that are not revoked: revoke one first`)
      }
      if (existing.some((k) => k.public_key === encoded)) throw new ApiError('key_exists', 'this public key is already registered for the source')
      if (this.#retiredKeys.has(sourceId, RetiredKeys.fingerprint(publicKey))) {
        throw new ApiError('key_exists', 'this public key was revoked for the source, and revocation is forward-only: register a new key')
      }
      this.#pruneRevoked(existing, REGISTRY_LIMITS.revokedKeysPerSource - 1)
      const record: KeyRecord = {
        key_id: newId('key'),
        source_id: sourceId,
        state: 'pending',
        public_key: encoded,
        created_at: this.#iso(),
        tested_at: null,
        promoted_at: null,
        grace_at: null,
        revoked_at: null,
      }
      this.#put(this.#keys, record.key_id, { record, publicKey: Buffer.from(publicKey) })
      this.#group(this.#keysBySource, sourceId, record.key_id)
      this.#change().keys.push(record)
      return record
    })
  }

  /**
   * Drops the oldest revoked records among one source's `keys` until at most `keep`
   * remain, keeping the fingerprint of each.
   */
  #pruneRevoked(keys: readonly KeyRecord[], keep: number): void {
    const revoked = keys
      .filter((k) => k.state === 'revoked')
      .sort((a, b) => ((a.revoked_at ?? '') < (b.revoked_at ?? '') ? -1 : 1))
    for (const k of revoked.slice(0, Math.max(0, revoked.length - keep))) {
      const live = this.#keys.get(k.key_id) as LiveKey
      this.#keys.delete(k.key_id)
      this.#keysBySource.delete(k.source_id, k.key_id)
      const change = this.#change()
      change.droppedKeys.push(k.key_id)
      change.undo.push(() => {
        this.#keys.set(k.key_id, live)
        this.#keysBySource.add(k.source_id, k.key_id)
      })
      this.#retire(k.source_id, live.publicKey)
    }
  }

  #retire(sourceId: string, publicKey: Uint8Array): void {
    const change = this.#change()
    // Past the bound, adding drops the oldest: undo puts the whole set back, order included.
    const before = this.#retiredKeys.copyOf(sourceId)
    change.undo.push(() => this.#retiredKeys.restore(sourceId, before))
    const fingerprint = RetiredKeys.fingerprint(publicKey)
    this.#retiredKeys.add(sourceId, fingerprint)
    change.retiredKeys.push({ source_id: sourceId, fingerprint })
  }

  /** Records that a pending key signed a test signal that was accepted. */
  markTested(sourceId: string, keyId: string): Promise<void> {
    return this.#once(`tested\n${keyId}`, () => {
      const key = this.key(sourceId, keyId)
      if (key === undefined || key.record.tested_at !== null) return
      this.#touch(key.record, this.#change().keys)
      key.record.tested_at = this.#iso()
    })
  }

  /**
   * pending → active, once a test signal passed (spec 3.1). The previous active key
   * moves to grace, where it still verifies until revoked (the rotation overlap).
   */
  promoteKey(sourceId: string, keyId: string): Promise<KeyRecord> {
    const promoted = this.#mutate(() => {
      const key = this.#required(sourceId, keyId)
      if (key.state !== 'pending') throw new ApiError('invalid_key_state', `only a pending key can be promoted; this key is ${key.state}`)
      if (key.tested_at === null) throw new ApiError('key_not_tested', 'send a test signal signed with this key before promoting it')
      const now = this.#iso()
      for (const other of this.keysOf(sourceId)) {
        if (other.state === 'active') {
          this.#touch(other, this.#change().keys)
          other.state = 'grace'
          other.grace_at = now
        }
      }
      this.#touch(key, this.#change().keys)
      key.state = 'active'
      key.promoted_at = now
      this.#promoting.add(keyId)
      return key
    })
    // Until the promotion is on disk the key still signs tests: a signal it signs in the
    // meantime must not be delivered if the promotion is then rolled back.
    const recorded = () => void this.#promoting.delete(keyId)
    promoted.then(recorded, recorded)
    return promoted
  }

  /** Whether what `key` signs now is a test signal (spec 3.1: a pending key's, never delivered). */
  signsTests(key: LiveKey): boolean {
    return key.record.state === 'pending' || this.#promoting.has(key.record.key_id)
  }

  /** Any state → revoked; forward-only and immediate: requests already waiting for verification or the log see it too. */
  revokeKey(sourceId: string, keyId: string): Promise<KeyRecord> {
    return this.#mutate(() => {
      const key = this.#required(sourceId, keyId)
      if (key.state !== 'revoked') {
        this.#touch(key, this.#change().keys)
        key.state = 'revoked'
        key.revoked_at = this.#iso()
        this.#pruneRevoked(this.keysOf(sourceId), REGISTRY_LIMITS.revokedKeysPerSource)
      }
      return key
    })
  }

  /**
   * Spec 5.3, compromise flow step 6: the source's operator disputes signals emitted
   * with a leaked key. The key must be revoked first (step 1), so nothing it signs
   * after the dispute is accepted any more.
   */
  openDispute(input: { source: SourceRecord; keyId: string; signals: DisputedSignal[]; evidence: string; openedBy: string }): Promise<DisputeRecord> {
    return this.#mutate(() => {
      const { source_id: sourceId, creator_id: creatorId } = input.source
      this.disputableKey(sourceId, input.keyId)
      // One live dispute per signal: naming it again would only take another place of the bounds below.
      const named = new Set(input.signals.map((s) => s.signal_id))
      for (const other of this.#disputes.of(sourceId)) {
        if (other.state === 'rejected') continue
        const again = other.signals.find((s) => named.has(s.signal_id))
        if (again !== undefined) throw new ApiError('already_exists', `signal ${again.signal_id} is already named by dispute ${other.dispute_id} (${other.state})`)
      }
      if (this.#disputes.of(sourceId).length >= DISPUTE_LIMITS.perSource) {
        throw new ApiError('limit_exceeded', `a source holds at most ${DISPUTE_LIMITS.perSource} disputes`)
      }
      if (this.#disputes.ofCreator(creatorId) >= DISPUTE_LIMITS.perCreator) {
        throw new ApiError('limit_exceeded', `a creator holds at most ${DISPUTE_LIMITS.perCreator} disputes over all its sources`)
      }
      if (this.#disputes.size >= DISPUTE_LIMITS.total) throw new ApiError('limit_exceeded', 'the registry holds no more disputes: ask the operator')
      const record: DisputeRecord = {
        dispute_id: newId('dsp'),
        source_id: sourceId,
        creator_id: creatorId,
        key_id: input.keyId,
        signals: input.signals,
        evidence: input.evidence,
        state: 'open',
        opened_by: input.openedBy,
        created_at: this.#iso(),
        resolved_at: null,
        resolution: null,
      }
      const change = this.#change()
      change.undo.push(this.#disputes.add(record))
      change.disputes.push(record)
      return record
    })
  }

  /** The key a dispute names: one of the source's, revoked (compromise flow step 1) so that it signs nothing more. */
  disputableKey(sourceId: string, keyId: string): KeyRecord {
    const key = this.#required(sourceId, keyId)
    if (key.state !== 'revoked') throw new ApiError('key_not_revoked', 'revoke the leaked key before disputing what it signed')
    return key
  }

  /**
   * The review's decision (spec 3.2: "compromise evidence is accepted"): open →
   * accepted, which puts the dispute's signals in state `disputed`, or open → rejected.
   * Final: repeating the decision changes nothing; reversing it, or repeating it with
   * another resolution note, is refused.
   */
  resolveDispute(sourceId: string, disputeId: string, outcome: 'accepted' | 'rejected', resolution: string | null): Promise<DisputeRecord> {
    return this.#mutate(() => {
      const record = this.#disputes.get(sourceId, disputeId)
      if (record === undefined) throw new ApiError('not_found', 'no such dispute for this source')
      if (record.state === outcome && (resolution === null || resolution === record.resolution)) return record
      if (record.state !== 'open') throw new ApiError('invalid_dispute_state', `this dispute was already ${record.state}, and a decision is final`)
      const change = this.#change()
      this.#touch(record, change.disputes)
      record.state = outcome
      record.resolved_at = this.#iso()
      record.resolution = resolution
      if (outcome === 'accepted') change.undo.push(this.#disputes.markDisputed(record))
      return record
    })
  }

  /** Newest first. */
  disputesOf(sourceId: string): DisputeRecord[] {
    return [...this.#disputes.of(sourceId)].reverse()
  }

  dispute(sourceId: string, disputeId: string): DisputeRecord | undefined {
    return this.#disputes.get(sourceId, disputeId)
  }

  /** Spec 3.2: the accepted dispute that moved the signal from accepted to disputed, if one did. */
  disputeOf(sourceId: string, signalId: string): string | undefined {
    return this.#disputes.disputeOf(sourceId, signalId)
  }

  /** The change under way; mutations run only inside #mutate. */
  #change(): PendingChange {
    if (this.#pending === undefined) throw new Error('registry changed outside #mutate')
    return this.#pending
  }

  /** Adds a new entry to `map`, removed again by undo. */
  #put<V>(map: Map<string, V>, id: string, value: V): void {
    map.set(id, value)
    this.#change().undo.push(() => map.delete(id))
  }

  /** Files a new record's id under its owner, removed again by undo. */
  #group(index: OwnerIndex, owner: string, id: string): void {
    index.add(owner, id)
    this.#change().undo.push(() => index.delete(owner, id))
  }

  /**
   * Notes that `record` is about to change in place (in place, because requests in
   * flight hold it and must see a revocation): recorded whole after the change, and
   * put back field by field by undo.
   */
  #touch<R extends object>(record: R, list: R[]): void {
    if (list.includes(record)) return
    list.push(record)
    const before = { ...record }
    this.#change().undo.push(() => Object.assign(record, before))
  }

  #required(sourceId: string, keyId: string): KeyRecord {
    const key = this.key(sourceId, keyId)
    if (key === undefined) throw new ApiError('not_found', 'no such key for this source')
    return key.record
  }

  /** Waits for changes in flight. */
  async settle(): Promise<void> {
    await this.#chain
  }
}

/** Puts memory back as it was before a change that could not be recorded, newest step first. */
function undo(pending: PendingChange): void {
  for (let i = pending.undo.length - 1; i >= 0; i--) (pending.undo[i] as () => void)()
}
