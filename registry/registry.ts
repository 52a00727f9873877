import { randomBytes } from 'node:crypto'
import { ApiError, type Listing, type Manifest, type RevocationReason } from '../schemas/index.js'
import { isKvError, KV_LIMITS, type KvBucket, type KvBucketLimits, type KvEntry, type KvWatcher } from '../storage/index.js'
import { DisputeGate } from './dispute-gate.js'
import { Disputes, greatestSignalSeq } from './disputes.js'
import { REGISTRY_LIMITS } from './limits.js'
import { creationOrder } from './ordered-records.js'
import { newId } from './records.js'
import type { AgentRecord, DisputedSignal, DisputeRecord, KeyRecord, Principal, SourceRecord, TokenRecord } from './records.js'
import { applyEntry, type HeldEntries } from './registry-apply.js'
import {
  agentKey,
  disputesKey,
  encodeEntry,
  sourceKey,
  tokenKey,
  type AgentEntry,
  type DisputesEntry,
  type SourceEntry,
  type TokenEntry,
} from './registry-entries.js'
import { addKeyTo, promoteKeyIn, revokeKeyIn, withFlag, withSourceChanges, withTested } from './source-changes.js'
import { SourceIndex, type LiveKey } from './source-index.js'
import { sha256, TokenIndex } from './token-index.js'

export type { LiveKey } from './source-index.js'

/** Tries of a write that lost a revision race to another request or process before it gives up with 503. */
const WRITE_ATTEMPTS = 8
/** How often caughtUp looks whether the watch has reached the bucket's revision. */
const CAUGHT_UP_POLL_MS = 5
/** A watch that ended (it fell behind, or lost the bucket for a while) is started again this much later. */
const REWATCH_MS = 1000

/** Tokens that authenticate, agents, and sources in all, at most. */
export interface RegistryBounds {
  readonly tokens: number
  readonly agents: number
  readonly sources: number
}

export interface RegistryOptions {
  /** Milliseconds since the epoch. */
  readonly now?: () => number
  readonly onWarning?: (message: string, err?: unknown) => void
  /** The bounds on tokens, agents and sources in all; REGISTRY_LIMITS's unless given (a test reaches smaller ones quickly). */
  readonly limits?: RegistryBounds
}

/** What a change decided: the entry to write (undefined: nothing to write), and what the operation answers. */
interface Decision<V, T> {
  readonly next: V | undefined
  readonly result: () => T
}

/**
 * Control-plane state: tokens, agents, sources, keys and disputes, on a KV bucket shared
 * by every process (the layout and why: `registry-entries.ts`). Reads are synchronous
 * look-ups in an index kept from the bucket's watch (the ingest hot path asks for a key
 * on every request), so a change made by any process reaches every process. Each change
 * is one write of one entry: create-if-absent for what is new, an update at the
 * expected revision for what changes, tried again on a fresh read when another request
 * or process wrote first. Nothing rests on a check and a write in one turn of the event
 * loop: what must hold between processes (one slot per source, one active key per
 * source, ids given once) is decided by the write of the entry that holds it. A change
 * resolves once the bucket holds it and this process's index shows it, so a read right
 * after it sees it; stored records are never changed in place, the index replaces them.
 */
export class Registry {
  readonly #bucket: KvBucket
  readonly #now: () => number
  readonly #onWarning: (message: string, err?: unknown) => void
  readonly #limits: RegistryBounds
  readonly #tokens: TokenIndex
  readonly #sources = new SourceIndex()
  readonly #disputes = new Disputes()
  /** Every entry as last stored, by key, with its revision: what a change starts from. */
  readonly #held: HeldEntries = new Map()
  readonly #disputeWatchers = new Set<(changed: readonly DisputeRecord[]) => void>()
  readonly #revocationWatchers = new Set<(tokenIds: readonly string[]) => void>()
  readonly #inFlight = new Map<string, Promise<void>>()
  readonly #writes = new Set<Promise<unknown>>()
  /** When delivery may go past a dispute placement met in the log (dispute-gate.ts). */
  readonly disputeGate = new DisputeGate((sourceId, disputeId) => this.#disputes.get(sourceId, disputeId)?.state)
  #watcher: KvWatcher | undefined
  /** Every change up to this revision of the bucket is in the index (see caughtUp). */
  #seenRevision = 0
  #watching: Promise<void> = Promise.resolve()
  #closed = false

  private constructor(bucket: KvBucket, adminToken: string, options: RegistryOptions) {
    this.#bucket = bucket
    this.#now = options.now ?? Date.now
    this.#onWarning = options.onWarning ?? (() => undefined)
    this.#limits = options.limits ?? REGISTRY_LIMITS
    this.#tokens = new TokenIndex(adminToken)
  }

  /**
   * Opens the registry on `bucket` (the caller opens and closes it); resolves once every
   * entry the bucket holds is in the index. The admin token is the process's own
   * configuration, compared (hashed, in constant time) but never stored.
   */
  static async open(bucket: KvBucket, adminToken: string, options: RegistryOptions | (() => number) = {}): Promise<Registry> {
    const registry = new Registry(bucket, adminToken, typeof options === 'function' ? { now: options } : options)
    await registry.#watch()
    return registry
  }

  /**
   * The bounds to open the registry bucket with: one entry per token (revoked ones kept
   * included), per agent, and two per source (its record and keys, its disputes), with
   * room for sources whose creation did not finish; values up to the port's largest (a
   * source's 16 disputes of up to 25 KB each are the largest entry).
   */
  static bucketLimits(): KvBucketLimits {
    const L = REGISTRY_LIMITS
    return { maxKeys: L.tokens + L.revokedTokens + L.agents + 2 * L.sources + 10_000, maxValueBytes: KV_LIMITS.maxValueBytes }
  }

  #iso(): string {
    return new Date(this.#now()).toISOString()
  }

  authenticate(token: string): Principal | undefined {
    return this.#tokens.authenticate(token)
  }

  stillAuthenticated(principal: Principal): boolean {
    return this.#tokens.stillAuthenticated(principal)
  }

  /** Checked against what this process knows: processes creating at the same moment may pass it by as many. */
  async createToken(role: TokenRecord['role'], subject: string): Promise<{ token: string; record: TokenRecord }> {
    if (this.#tokens.live >= this.#limits.tokens) throw new ApiError('limit_exceeded', `at most ${this.#limits.tokens} tokens: revoke one first`)
    const token = `sgw_${randomBytes(32).toString('base64url')}`
    // Never before the last token's, even if the clock steps back: token lists page by
    // this time once a cursor's token is dropped (gateway/control/paging.ts).
    const now = this.#iso()
    const last = this.#tokens.lastCreatedAt
    const record: TokenRecord = { token_id: newId('tok'), sha256: sha256(token).toString('hex'), role, subject, created_at: now < last ? last : now, revoked_at: null }
    const entry: TokenEntry = { token: record, order: creationOrder(this.#now()) }
    await this.#create(tokenKey(record.token_id), entry)
    return { token, record }
  }

  /** Token records, oldest first; never the token, which is not kept. */
  tokens(): IterableIterator<TokenRecord> {
    return this.#tokens.records().values()
  }

  token(tokenId: string): TokenRecord | undefined {
    return this.#tokens.get(tokenId)
  }

  /** Forward-only and immediate: the next request with the token is refused, on every process. Revoking again changes nothing. */
  async revokeToken(tokenId: string): Promise<TokenRecord> {
    const record = await this.#change<TokenEntry, TokenRecord>(tokenKey(tokenId), (entry) => {
      if (entry === undefined) throw new ApiError('not_found', 'no such token')
      if (entry.token.revoked_at !== null) return { next: undefined, result: () => entry.token }
      const next = { ...entry, token: { ...entry.token, revoked_at: this.#iso() } }
      return { next, result: () => next.token }
    })
    await this.#pruneRevokedTokens()
    return record
  }

  /**
   * Drops the revoked token records revoked first past the bound (their hashes go with
   * them, so they still authenticate nobody). Housekeeping after the revocation, which
   * stands whether or not this finishes; the next revocation prunes again.
   */
  async #pruneRevokedTokens(): Promise<void> {
    const excess = this.#tokens.revoked - REGISTRY_LIMITS.revokedTokens
    if (excess <= 0) return
    for (const record of this.#tokens.oldestRevoked(excess)) {
      const key = tokenKey(record.token_id)
      const held = this.#held.get(key)
      if (held === undefined) continue
      try {
        await this.#bucket.delete(key, { revision: held.revision })
        // Gone from the index now, not when the watch brings the deletion (any revision past the record's will do).
        this.#apply({ key, operation: 'DEL', revision: held.revision + 1 })
      } catch (err) {
        if (!isKvError(err, 'wrong_revision')) throw err
      }
    }
  }

  /** Agent ids are the operator's: a second creation of one, by any process, is `409 already_exists`. */
  async createAgent(input: { agent_id: string; creator_id: string; slots: number }): Promise<AgentRecord> {
    if (this.#sources.agent(input.agent_id) !== undefined) throw new ApiError('already_exists', `agent ${input.agent_id} already exists`)
    if (this.#sources.agentCount >= this.#limits.agents) throw new ApiError('limit_exceeded', `at most ${this.#limits.agents} agents`)
    const agent: AgentRecord = { agent_id: input.agent_id, creator_id: input.creator_id, slots: input.slots, created_at: this.#iso() }
    try {
      await this.#create(agentKey(agent.agent_id), { agent, order: creationOrder(this.#now()), sources: [] } satisfies AgentEntry)
    } catch (err) {
      if (isKvError(err, 'exists')) throw new ApiError('already_exists', `agent ${input.agent_id} already exists`)
      throw err
    }
    return agent
  }

  agent(agentId: string): AgentRecord | undefined {
    return this.#sources.agent(agentId)
  }

  /** Every agent, oldest first. */
  agents(): IterableIterator<AgentRecord> {
    return this.#sources.agents().values()
  }

  /** The operator changes an agent's slots: never below those its live sources take. */
  setAgentSlots(agentId: string, slots: number): Promise<AgentRecord> {
    return this.#change<AgentEntry, AgentRecord>(agentKey(agentId), (entry) => {
      if (entry === undefined) throw new ApiError('not_found', 'no such agent')
      const used = entry.sources.filter((s) => s.retired_at === null).length
      if (slots < used) throw new ApiError('slots_in_use', `agent ${agentId} has ${used} sources on its slots: retire some before going below ${used}`)
      if (entry.agent.slots === slots) return { next: undefined, result: () => entry.agent }
      const next = { ...entry, agent: { ...entry.agent, slots } }
      return { next, result: () => next.agent }
    })
  }

  /** The agent's sources, retired ones included, oldest first. */
  sourcesOfAgent(agentId: string): SourceRecord[] {
    return this.#sources.ofAgent(agentId)
  }

  /** The creator's sources over all its agents, retired ones included, oldest first. */
  sourcesOfCreator(creatorId: string): SourceRecord[] {
    return this.#sources.ofCreator(creatorId)
  }

  /** Every source, retired ones included, oldest first. */
  sources(): IterableIterator<SourceRecord> {
    return this.#sources.sources().values()
  }

  /** Slots the agent's live sources take (a retired source takes none). */
  slotsUsed(agentId: string): number {
    return this.#sources.slotsUsed(agentId)
  }

  /**
   * Registers a source on one of the agent's open slots. Two writes, of which the second
   * decides: the source's entry first (no source yet: its agent does not name it), then
   * the agent's entry naming it, at its expected revision, which is where the slot is
   * taken. If that is refused the first entry is deleted again.
   */
  async createSource(input: { agent: AgentRecord; manifest: Manifest; listing: Listing }): Promise<SourceRecord> {
    const agentId = input.agent.agent_id
    const agentEntry = this.#sources.agentEntry(agentId)
    if (agentEntry !== undefined) this.#checkSlot(agentEntry)
    const now = this.#iso()
    const source: SourceRecord = {
      source_id: newId('src'),
      agent_id: agentId,
      creator_id: input.agent.creator_id,
      manifest: input.manifest,
      listing: input.listing,
      created_at: now,
      flagged_for_review_at: null,
      updated_at: null,
      retired_at: null,
    }
    const key = sourceKey(source.source_id)
    await this.#create(key, { source, order: creationOrder(this.#now()), keys: [], retired_keys: [] } satisfies SourceEntry)
    try {
      await this.#change<AgentEntry, void>(agentKey(agentId), (entry) => {
        if (entry === undefined) throw new ApiError('not_found', 'no such agent')
        this.#checkSlot(entry)
        return { next: { ...entry, sources: [...entry.sources, { source_id: source.source_id, retired_at: null }] }, result: () => undefined }
      })
    } catch (err) {
      await this.#deleteUnnamed(key)
      throw err
    }
    return this.#sources.source(source.source_id) as SourceRecord
  }

  #checkSlot(entry: AgentEntry): void {
    const live = entry.sources.filter((s) => s.retired_at === null).length
    if (live >= entry.agent.slots) throw new ApiError('no_open_slot', `agent ${entry.agent.agent_id} has no open slot`)
    if (this.#sources.sourceCount >= this.#limits.sources) throw new ApiError('limit_exceeded', `at most ${this.#limits.sources} sources: ask the operator`)
    if (entry.sources.length - live >= REGISTRY_LIMITS.retiredSourcesPerAgent) {
      throw new ApiError('limit_exceeded', `agent ${entry.agent.agent_id} keeps ${REGISTRY_LIMITS.retiredSourcesPerAgent} retired sources, the most an agent keeps: ask the operator for another agent`)
    }
  }

  /** Deletes the entry of a source whose agent refused it (best effort: unnamed, it is no source anyway). */
  async #deleteUnnamed(key: string): Promise<void> {
    const held = this.#held.get(key)
    if (held === undefined) return
    try {
      await this.#bucket.delete(key, { revision: held.revision })
      this.#apply({ key, operation: 'DEL', revision: held.revision + 1 })
    } catch (err) {
      this.#onWarning(`registry: ${key} of a source that was not created could not be deleted`, err)
    }
  }

  /**
   * A live source: what ingest and every new use go through. A retired source is not
   * one, so ingest to it takes the path of a source that does not exist.
   */
  source(sourceId: string): SourceRecord | undefined {
    const source = this.#sources.source(sourceId)
    return source === undefined || source.retired_at !== null ? undefined : source
  }

  /** Any source ever registered, retired ones included: for reading a source and its history. */
  anySource(sourceId: string): SourceRecord | undefined {
    return this.#sources.source(sourceId)
  }

  /** The live source, for a change only a live source takes: a retired one is `409 source_retired`. */
  #live(sourceId: string): SourceRecord {
    const source = this.#sources.source(sourceId)
    if (source === undefined) throw new ApiError('not_found', 'no such source')
    if (source.retired_at !== null) throw new ApiError('source_retired', `this source was retired at ${source.retired_at}; register a new source`)
    return source
  }

  /**
   * Replaces a live source's manifest, listing or both: a request in flight reads the
   * source again at its next check, and meets the new max_rate, severity levels and chains.
   */
  async updateSource(sourceId: string, changes: { manifest?: Manifest; listing?: Listing }): Promise<SourceRecord> {
    this.#live(sourceId)
    return this.#changeSource(sourceId, (entry) => ({ next: withSourceChanges(entry, changes, this.#iso()), result: () => this.#sources.source(sourceId) as SourceRecord }))
  }

  /**
   * Live → retired, final; its slot is free at once. Retiring again changes nothing. One
   * write of the agent's entry, which holds both the slot and the retirement.
   */
  async retireSource(sourceId: string): Promise<SourceRecord> {
    const source = this.#sources.source(sourceId)
    if (source === undefined) throw new ApiError('not_found', 'no such source')
    if (source.retired_at !== null) return source
    await this.#change<AgentEntry, void>(agentKey(source.agent_id), (entry) => {
      const slot = entry?.sources.find((s) => s.source_id === sourceId)
      if (entry === undefined || slot === undefined) throw new ApiError('not_found', 'no such source')
      if (slot.retired_at !== null) return { next: undefined, result: () => undefined }
      const now = this.#iso()
      return { next: { ...entry, sources: entry.sources.map((s) => (s.source_id === sourceId ? { source_id: sourceId, retired_at: now } : s)) }, result: () => undefined }
    })
    return this.#sources.source(sourceId) as SourceRecord
  }

  /** Marks a source for review after sustained over-rate; idempotent. */
  flagSource(sourceId: string): Promise<void> {
    return this.#once(`flag\n${sourceId}`, async () => {
      if (this.#sources.source(sourceId)?.flagged_for_review_at !== null) return
      await this.#changeSource(sourceId, (entry) => ({ next: withFlag(entry, this.#iso()), result: () => undefined }))
    })
  }

  keysOf(sourceId: string): KeyRecord[] {
    return this.#sources.keysOf(sourceId)
  }

  /** The key `keyId` if it belongs to `sourceId`; a key of another source is unknown here. */
  key(sourceId: string, keyId: string): LiveKey | undefined {
    return this.#sources.key(sourceId, keyId)
  }

  /** Every new key starts pending: it signs only test signals until a test signal passed and it is promoted. */
  async addKey(sourceId: string, publicKey: Uint8Array): Promise<KeyRecord> {
    this.#live(sourceId)
    return this.#changeSource(sourceId, (entry) => {
      const { next, record } = addKeyTo(entry, publicKey, this.#iso())
      return { next, result: () => record }
    })
  }

  /** Records that a pending key signed a test signal that was accepted. */
  markTested(sourceId: string, keyId: string): Promise<void> {
    return this.#once(`tested\n${keyId}`, async () => {
      const key = this.key(sourceId, keyId)
      if (key === undefined || key.record.tested_at !== null) return
      await this.#changeSource(sourceId, (entry) => ({ next: withTested(entry, keyId, this.#iso()), result: () => undefined }))
    })
  }

  /**
   * pending → active, once a test signal passed. The previous active key moves to grace,
   * where it still verifies until revoked (the rotation overlap); both in one write of
   * the source's entry, so a source never has two active keys. Until the write is
   * stored and in the index the key is pending, and what it signs meanwhile is a test
   * signal, never delivered.
   */
  async promoteKey(sourceId: string, keyId: string): Promise<KeyRecord> {
    this.#required(sourceId, keyId)
    this.#live(sourceId)
    return this.#changeSource(sourceId, (entry) => {
      const next = promoteKeyIn(entry, keyId, this.#iso())
      return { next, result: () => (this.key(sourceId, keyId) as LiveKey).record }
    })
  }

  /** Whether what `key` signs now is a test signal: a pending key's, never delivered. */
  signsTests(key: LiveKey): boolean {
    return key.record.state === 'pending'
  }

  /**
   * Any state → revoked; forward-only and immediate: requests already waiting for
   * verification or the log see it too. Also for a retired source's keys: revoking a
   * leaked key comes before disputing what it signed. Revoking again changes nothing,
   * except that it may give a reason where none was given, or turn `rotation` into
   * `compromise` (a leak found after a planned rotation); a compromise is never taken back.
   */
  async revokeKey(sourceId: string, keyId: string, reason: RevocationReason | null = null): Promise<KeyRecord> {
    this.#required(sourceId, keyId)
    return this.#changeSource(sourceId, (entry) => {
      const { next, record } = revokeKeyIn(entry, keyId, reason, this.#iso())
      return { next, result: () => record }
    })
  }

  /**
   * The source's operator disputes signals emitted with a leaked key. The key must be
   * revoked first, so nothing it signs after the dispute is accepted any more (a
   * revocation is forward-only, so the check cannot be overtaken).
   */
  async openDispute(input: { source: SourceRecord; keyId: string; signals: DisputedSignal[]; evidence: string; openedBy: string }): Promise<DisputeRecord> {
    const { source_id: sourceId, creator_id: creatorId } = input.source
    this.disputableKey(sourceId, input.keyId)
    return this.#change<DisputesEntry, DisputeRecord>(disputesKey(sourceId), (entry) => {
      const disputes = entry?.disputes ?? []
      this.#disputes.checkCanOpen(disputes, creatorId, input.signals.map((s) => s.signal_id))
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
        after_seq: null,
        accept_order: null,
      }
      return { next: { disputes: [...disputes, record] }, result: () => this.#disputes.get(sourceId, record.dispute_id) as DisputeRecord }
    })
  }

  /** The key a dispute names: one of the source's, revoked so that it signs nothing more. */
  disputableKey(sourceId: string, keyId: string): KeyRecord {
    const key = this.#required(sourceId, keyId)
    if (key.state !== 'revoked') throw new ApiError('key_not_revoked', 'revoke the leaked key before disputing what it signed')
    return key
  }

  /**
   * The review's decision on the compromise evidence: open → accepted, which puts the
   * dispute's signals in state `disputed`, or open → rejected. Final: repeating the
   * decision changes nothing; reversing it, or repeating it with another resolution
   * note, is refused. `afterSeq`: the signal log's last seq as it is accepted, after
   * which renters receive its events (never before its own signals; without it, right
   * after the greatest of them). accept_order numbers the source's acceptances, which
   * orders those at the same after_seq.
   */
  /**
   * `afterSeq`: the seq of the dispute's placement in the log. `writeBy`: the time (ms)
   * after which the decision is no longer written but refused with not_ready, checked
   * before each write attempt: delivery passes over a placement whose dispute is not
   * recorded in time (dispute-gate.ts), so it must never be recorded late.
   */
  resolveDispute(sourceId: string, disputeId: string, outcome: 'accepted' | 'rejected', resolution: string | null, afterSeq?: number, writeBy?: number): Promise<DisputeRecord> {
    return this.#change<DisputesEntry, DisputeRecord>(disputesKey(sourceId), (entry) => {
      const disputes = entry?.disputes ?? []
      const record = disputes.find((d) => d.dispute_id === disputeId)
      if (record === undefined) throw new ApiError('not_found', 'no such dispute for this source')
      const current = () => this.#disputes.get(sourceId, disputeId) as DisputeRecord
      if (record.state === outcome && (resolution === null || resolution === record.resolution)) return { next: undefined, result: current }
      if (record.state !== 'open') throw new ApiError('invalid_dispute_state', `this dispute was already ${record.state}, and a decision is final`)
      if (writeBy !== undefined && this.#now() > writeBy) throw new ApiError('not_ready', 'the dispute could not be recorded in time; retry', { retryAfter: 1 })
      const decided: DisputeRecord = { ...record, state: outcome, resolved_at: this.#iso(), resolution }
      if (outcome === 'accepted') {
        decided.after_seq = Math.max(afterSeq ?? 0, greatestSignalSeq(record))
        decided.accept_order = disputes.reduce((max, d) => Math.max(max, d.accept_order ?? 0), 0) + 1
      }
      return { next: { disputes: disputes.map((d) => (d.dispute_id === disputeId ? decided : d)) }, result: current }
    })
  }

  /** Newest first. */
  disputesOf(sourceId: string): DisputeRecord[] {
    return [...this.#disputes.of(sourceId)].reverse()
  }

  dispute(sourceId: string, disputeId: string): DisputeRecord | undefined {
    return this.#disputes.get(sourceId, disputeId)
  }

  /** The accepted dispute that moved the signal from accepted to disputed, if one did. */
  disputeOf(sourceId: string, signalId: string): string | undefined {
    return this.#disputes.disputeOf(sourceId, signalId)
  }

  /** The source's accepted disputes, once recorded, in the order renters receive them: by after_seq, then accept_order. */
  acceptedDisputesOf(sourceId: string): readonly DisputeRecord[] {
    return this.#disputes.acceptedOf(sourceId)
  }

  /** Every dispute of every source, in the order they were opened (at most DISPUTE_LIMITS.total). */
  allDisputes(): DisputeRecord[] {
    return this.#disputes.all()
  }

  /**
   * Told the ids of tokens revoked, by this process or any other sharing the bucket, so
   * that what a token opened (event streams) is closed at once; returns how to stop.
   */
  watchRevocations(listener: (tokenIds: readonly string[]) => void): () => void {
    this.#revocationWatchers.add(listener)
    return () => void this.#revocationWatchers.delete(listener)
  }

  /** Whether the token of this id authenticates still (false once revoked, or unknown). */
  tokenLive(tokenId: string): boolean {
    return this.#tokens.get(tokenId)?.revoked_at === null
  }

  /**
   * Calls `listener` with the disputes opened or resolved, by this process or any other
   * sharing the bucket, once stored (the receipts follow them); returns how to stop. A
   * listener must not throw.
   */
  watchDisputes(listener: (changed: readonly DisputeRecord[]) => void): () => void {
    this.#disputeWatchers.add(listener)
    return () => void this.#disputeWatchers.delete(listener)
  }

  #required(sourceId: string, keyId: string): KeyRecord {
    const key = this.key(sourceId, keyId)
    if (key === undefined) throw new ApiError('not_found', 'no such key for this source')
    return key.record
  }

  /** Waits for changes in flight. */
  async settle(): Promise<void> {
    while (this.#writes.size > 0) await Promise.allSettled([...this.#writes])
  }

  /** Waits for changes in flight and stops the watch. The bucket is the caller's to close. Safe to call twice. */
  /**
   * Resolves once the index holds every change the bucket had stored when this was called,
   * made by this process or another: the bucket's last revision, then the watch up to it.
   * What a gateway waits for before it answers a revocation barrier (another process's
   * revocation is then refused by this one's next look-up).
   */
  async caughtUp(timeoutMs = 10_000): Promise<void> {
    const { revision } = await this.#bucket.status()
    const deadline = Date.now() + timeoutMs
    while (this.#seenRevision < revision) {
      if (this.#closed) throw new ApiError('not_ready', 'the registry is closed', { retryAfter: 1 })
      if (Date.now() > deadline) throw new ApiError('not_ready', `the registry's view is behind its bucket (at revision ${this.#seenRevision} of ${revision})`, { retryAfter: 1 })
      await new Promise((resolve) => setTimeout(resolve, CAUGHT_UP_POLL_MS))
    }
  }

  async close(): Promise<void> {
    await this.settle()
    this.#closed = true
    this.#watcher?.stop()
    await this.#watching
  }

  /**
   * A change that many requests may ask for at once (flag a source, mark a key tested):
   * callers that ask while it is in flight share it, so a flood of 429s or of test
   * signals writes the registry once, not once per request.
   */
  #once(what: string, change: () => Promise<void>): Promise<void> {
    const running = this.#inFlight.get(what)
    if (running !== undefined) return running
    const done = this.#tracked(change()).finally(() => this.#inFlight.delete(what))
    this.#inFlight.set(what, done)
    return done
  }

  #changeSource<T>(sourceId: string, decide: (entry: SourceEntry) => Decision<SourceEntry, T>): Promise<T> {
    return this.#change<SourceEntry, T>(sourceKey(sourceId), (entry) => {
      if (entry === undefined || this.#sources.source(sourceId) === undefined) throw new ApiError('not_found', 'no such source')
      return decide(entry)
    })
  }

  /** Writes a new entry; KvError `exists` if the key has one. */
  async #create(key: string, value: TokenEntry | AgentEntry | SourceEntry): Promise<void> {
    const revision = await this.#tracked(this.#bucket.create(key, encodeEntry(value)))
    this.#apply({ key, operation: 'PUT', revision, value })
  }

  /**
   * One change of one entry: `decide` reads the entry as stored and says what to write.
   * Tried first on this process's copy, then, if another request or process wrote the
   * entry first (`wrong_revision`, or `exists` for a key created meanwhile), on a fresh
   * read of it. Resolves once the write is stored and in the index.
   */
  #change<V, T>(key: string, decide: (entry: V | undefined) => Decision<V, T>): Promise<T> {
    return this.#tracked(
      (async () => {
        let held = this.#held.get(key)
        for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
          const { next, result } = decide(held?.value as V | undefined)
          if (next === undefined) return result()
          try {
            const bytes = encodeEntry(next as never)
            const revision = held === undefined ? await this.#bucket.create(key, bytes) : await this.#bucket.update(key, bytes, held.revision)
            this.#apply({ key, operation: 'PUT', revision, value: next })
            return result()
          } catch (err) {
            if (!isKvError(err, 'wrong_revision') && !isKvError(err, 'exists')) throw err
          }
          const fresh = await this.#bucket.get(key)
          if (fresh !== null) this.#applyStored(fresh)
          held = fresh === null ? undefined : this.#held.get(key)
        }
        throw new ApiError('not_ready', 'the registry entry is being changed by other requests; retry', { retryAfter: 1 })
      })(),
    )
  }

  #tracked<T>(write: Promise<T>): Promise<T> {
    this.#writes.add(write)
    const done = () => void this.#writes.delete(write)
    write.then(done, done)
    return write
  }

  /** Watches the bucket from its current values; resolves once they are all in the index. */
  async #watch(): Promise<void> {
    // Read before the watch starts: every revision up to it is among the values the watch starts with.
    const { revision: before } = await this.#bucket.status()
    const watcher = this.#bucket.watch()
    this.#watcher = watcher
    this.#watching = (async () => {
      try {
        for await (const entry of watcher) {
          this.#applyStored(entry, entry.isUpdate)
          if (entry.revision > this.#seenRevision) this.#seenRevision = entry.revision
        }
      } catch (err) {
        if (this.#closed) return
        // Fell behind (watch_overflow) or lost the bucket for a while: start again from
        // the current values, which the revisions make safe to take twice.
        this.#onWarning('registry: the bucket watch ended; watching again', err)
        setTimeout(() => void this.#watch().catch((again: unknown) => this.#onWarning('registry: the bucket cannot be watched', again)), REWATCH_MS).unref()
      }
    })()
    await watcher.initialized
    if (before > this.#seenRevision) this.#seenRevision = before
  }

  /** Takes a stored entry (from the watch or a read); a value that is no registry entry is left out with a warning. */
  #applyStored(entry: KvEntry, isUpdate = true): void {
    try {
      this.#apply(entry.operation === 'DEL' ? { key: entry.key, operation: 'DEL', revision: entry.revision } : { key: entry.key, operation: 'PUT', revision: entry.revision, bytes: entry.value }, isUpdate)
    } catch (err) {
      this.#onWarning(`registry: ${entry.key} does not hold a registry entry; left out`, err)
    }
  }

  /**
   * Takes a change into the index if newer than what it holds, and tells the watchers
   * of what it revoked or decided (not for the values a watch starts with: those are no
   * news).
   */
  #apply(change: Parameters<typeof applyEntry>[1], notify = true): void {
    const told = applyEntry({ held: this.#held, tokens: this.#tokens, sources: this.#sources, disputes: this.#disputes }, change)
    if (told === undefined || !notify) return
    if (told.revoked.length > 0) {
      for (const watcher of this.#revocationWatchers) {
        try {
          watcher(told.revoked)
        } catch {
          // The change is stored: a watcher's failure (it logs its own) must not undo it.
        }
      }
    }
    if (told.disputes.length > 0) {
      this.disputeGate.changed()
      for (const watcher of this.#disputeWatchers) watcher(told.disputes)
    }
  }
}
