import { ApiError, type Listing, type Manifest, type RevocationReason } from '../schemas/index.js'
import { ChangeSet } from './change-set.js'
import { DisputeGate } from './dispute-gate.js'
import { Disputes, greatestSignalSeq } from './disputes.js'
import { REGISTRY_LIMITS } from './limits.js'
import { OwnerIndex } from './owner-index.js'
import { newId } from './records.js'
import { RegistryError } from './registry-error.js'
import type { AgentRecord, DisputedSignal, DisputeRecord, KeyRecord, Principal, RegistrySnapshot, SourceRecord, TokenRecord } from './records.js'
import type { RegistryStore } from './registry-store.js'
import { RetiredKeys } from './retired-keys.js'
import { SourceTable } from './source-table.js'
import { TokenTable } from './token-table.js'

/** A key as the hot path needs it: the record plus the decoded public key. */
export interface LiveKey {
  readonly record: KeyRecord
  readonly publicKey: Uint8Array
}

/**
 * Control-plane state: tokens, agents, sources and keys. Reads are synchronous
 * map look-ups (the ingest hot path asks for a key on every request); every change
 * is persisted through the store before the promise resolves, one at a time, so the
 * file never lags what a client was told (`change-set.ts`).
 */
export class Registry {
  readonly #now: () => number
  readonly #changes: ChangeSet
  readonly #tokens: TokenTable
  readonly #agents: Map<string, AgentRecord>
  readonly #sources: SourceTable
  readonly #keys: Map<string, LiveKey>
  readonly #keysBySource = new OwnerIndex()
  readonly #retiredKeys: RetiredKeys
  readonly #disputes: Disputes
  readonly #disputeWatchers = new Set<(changed: readonly DisputeRecord[]) => void>()
  readonly #revocationWatchers = new Set<(tokenIds: readonly string[]) => void>()
  /** Acceptances under way in this process, which hold the delivery channels back (dispute-gate.ts). */
  readonly disputeGate = new DisputeGate()
  /** Keys whose promotion is made in memory but not yet recorded. */
  readonly #promoting = new Set<string>()

  private constructor(store: RegistryStore, adminToken: string, now: () => number, snapshot: RegistrySnapshot | undefined) {
    this.#now = now
    this.#changes = new ChangeSet(async (change) => {
      await store.append(change, () => this.#snapshot())
      // Told once the change is durable, so a watcher never acts on one the registry could still undo.
      if (change.disputes !== undefined && change.disputes.length > 0) {
        for (const d of change.disputes) this.#disputes.fileForDelivery(d)
        for (const watcher of this.#disputeWatchers) watcher(change.disputes)
      }
      const revoked = change.tokens.filter((t) => t.revoked_at !== null).map((t) => t.token_id)
      for (const watcher of revoked.length > 0 ? this.#revocationWatchers : []) {
        try {
          watcher(revoked)
        } catch {
          // The change is recorded: a watcher's failure (it logs its own) must not undo it.
        }
      }
    })
    this.#tokens = new TokenTable(this.#changes, adminToken, snapshot?.tokens)
    this.#agents = new Map((snapshot?.agents ?? []).map((a) => [a.agent_id, a]))
    this.#sources = new SourceTable(this.#changes, snapshot?.sources)
    // Records kept before revocations could give a reason have none.
    for (const k of snapshot?.keys ?? []) k.revocation_reason ??= null
    this.#keys = new Map((snapshot?.keys ?? []).map((k) => [k.key_id, { record: k, publicKey: Buffer.from(k.public_key, 'base64url') }]))
    for (const k of this.#keys.values()) this.#keysBySource.add(k.record.source_id, k.record.key_id)
    this.#retiredKeys = new RetiredKeys(snapshot?.retired_keys)
    this.#disputes = new Disputes(snapshot?.disputes)
  }

  static async open(store: RegistryStore, adminToken: string, now: () => number = Date.now): Promise<Registry> {
    const snapshot = await store.load()
    try {
      return new Registry(store, adminToken, now, snapshot)
    } catch (err) {
      // Only stored records are read here: one that breaks the load is damage, not a fault a restart could clear.
      throw new RegistryError(`the registry holds a record that cannot be loaded (${err instanceof Error ? err.message : String(err)})`, { cause: err })
    }
  }

  #snapshot(): RegistrySnapshot {
    return {
      version: 1,
      tokens: [...this.#tokens.records()],
      agents: [...this.#agents.values()],
      sources: [...this.#sources.all()],
      keys: [...this.#keys.values()].map((k) => k.record),
      retired_keys: this.#retiredKeys.entries(),
      disputes: this.#disputes.all(),
    }
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

  createToken(role: TokenRecord['role'], subject: string): Promise<{ token: string; record: TokenRecord }> {
    return this.#changes.run(() => this.#tokens.create(role, subject, this.#iso()))
  }

  /** Token records, oldest first; never the token, which is not kept. */
  tokens(): IterableIterator<TokenRecord> {
    return this.#tokens.records()
  }

  token(tokenId: string): TokenRecord | undefined {
    return this.#tokens.get(tokenId)
  }

  revokeToken(tokenId: string): Promise<TokenRecord> {
    return this.#changes.run(() => this.#tokens.revoke(tokenId, this.#iso()))
  }

  createAgent(input: { agent_id: string; creator_id: string; slots: number }): Promise<AgentRecord> {
    return this.#changes.run(() => {
      if (this.#agents.has(input.agent_id)) throw new ApiError('already_exists', `agent ${input.agent_id} already exists`)
      if (this.#agents.size >= REGISTRY_LIMITS.agents) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.agents} agents`)
      const agent: AgentRecord = { ...input, created_at: this.#iso() }
      this.#changes.put(this.#agents, agent.agent_id, agent)
      this.#changes.current.agents.push(agent)
      return agent
    })
  }

  agent(agentId: string): AgentRecord | undefined {
    return this.#agents.get(agentId)
  }

  /** Every agent, oldest first. */
  agents(): IterableIterator<AgentRecord> {
    return this.#agents.values()
  }

  /** The operator changes an agent's slots: never below those its live sources take. */
  setAgentSlots(agentId: string, slots: number): Promise<AgentRecord> {
    return this.#changes.run(() => {
      const agent = this.#agents.get(agentId)
      if (agent === undefined) throw new ApiError('not_found', 'no such agent')
      const used = this.slotsUsed(agentId)
      if (slots < used) throw new ApiError('slots_in_use', `agent ${agentId} has ${used} sources on its slots: retire some before going below ${used}`)
      if (agent.slots !== slots) {
        this.#changes.touch(agent, this.#changes.current.agents)
        agent.slots = slots
      }
      return agent
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
    return this.#sources.all()
  }

  /** Slots the agent's live sources take (a retired source takes none). */
  slotsUsed(agentId: string): number {
    return this.#sources.slotsUsed(agentId)
  }

  /** Registers a source on one of the agent's open slots. */
  createSource(input: { agent: AgentRecord; manifest: Manifest; listing: Listing }): Promise<SourceRecord> {
    return this.#changes.run(() => this.#sources.create(input.agent, input.manifest, input.listing, this.#iso()))
  }

  /**
   * A live source: what ingest and every new use go through. A retired source is not
   * one, so ingest to it takes the path of a source that does not exist.
   */
  source(sourceId: string): SourceRecord | undefined {
    const source = this.#sources.get(sourceId)
    return source === undefined || source.retired_at !== null ? undefined : source
  }

  /** Any source ever registered, retired ones included: for reading a source and its history. */
  anySource(sourceId: string): SourceRecord | undefined {
    return this.#sources.get(sourceId)
  }

  /**
   * Replaces a live source's manifest, listing or both, in place: a request in flight
   * meets the new max_rate, severity levels and chains at its next check.
   */
  updateSource(sourceId: string, changes: { manifest?: Manifest; listing?: Listing }): Promise<SourceRecord> {
    return this.#changes.run(() => this.#sources.update(sourceId, changes, this.#iso()))
  }

  /** Live → retired, final; its slot is free at once. Retiring again changes nothing. */
  retireSource(sourceId: string): Promise<SourceRecord> {
    return this.#changes.run(() => this.#sources.retire(sourceId, this.#iso()))
  }

  /** Marks a source for review after sustained over-rate; idempotent. */
  flagSource(sourceId: string): Promise<void> {
    return this.#changes.once(`flag\n${sourceId}`, () => {
      const source = this.#sources.get(sourceId)
      if (source === undefined || source.flagged_for_review_at !== null) return
      this.#changes.touch(source, this.#changes.current.sources)
      source.flagged_for_review_at = this.#iso()
    })
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
    return this.#changes.run(() => {
      this.#sources.live(sourceId)
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
        revocation_reason: null,
      }
      this.#changes.put(this.#keys, record.key_id, { record, publicKey: Buffer.from(publicKey) })
      this.#changes.group(this.#keysBySource, sourceId, record.key_id)
      this.#changes.current.keys.push(record)
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
      const change = this.#changes.current
      change.droppedKeys.push(k.key_id)
      change.undo.push(() => {
        this.#keys.set(k.key_id, live)
        this.#keysBySource.add(k.source_id, k.key_id)
      })
      this.#retire(k.source_id, live.publicKey)
    }
  }

  #retire(sourceId: string, publicKey: Uint8Array): void {
    const change = this.#changes.current
    // Past the bound, adding drops the oldest: undo puts the whole set back, order included.
    const before = this.#retiredKeys.copyOf(sourceId)
    change.undo.push(() => this.#retiredKeys.restore(sourceId, before))
    const fingerprint = RetiredKeys.fingerprint(publicKey)
    this.#retiredKeys.add(sourceId, fingerprint)
    change.retiredKeys.push({ source_id: sourceId, fingerprint })
  }

  /** Records that a pending key signed a test signal that was accepted. */
  markTested(sourceId: string, keyId: string): Promise<void> {
    return this.#changes.once(`tested\n${keyId}`, () => {
      const key = this.key(sourceId, keyId)
      if (key === undefined || key.record.tested_at !== null) return
      this.#changes.touch(key.record, this.#changes.current.keys)
      key.record.tested_at = this.#iso()
    })
  }

  /**
   * pending → active, once a test signal passed (spec 3.1). The previous active key
   * moves to grace, where it still verifies until revoked (the rotation overlap).
   */
  promoteKey(sourceId: string, keyId: string): Promise<KeyRecord> {
    const promoted = this.#changes.run(() => {
      const key = this.#required(sourceId, keyId)
      this.#sources.live(sourceId)
      if (key.state !== 'pending') throw new ApiError('invalid_key_state', `only a pending key can be promoted; this key is ${key.state}`)
      if (key.tested_at === null) throw new ApiError('key_not_tested', 'send a test signal signed with this key before promoting it')
      const now = this.#iso()
      for (const other of this.keysOf(sourceId)) {
        if (other.state === 'active') {
          this.#changes.touch(other, this.#changes.current.keys)
          other.state = 'grace'
          other.grace_at = now
        }
      }
      this.#changes.touch(key, this.#changes.current.keys)
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

  /**
   * Any state → revoked; forward-only and immediate: requests already waiting for
   * verification or the log see it too. Also for a retired source's keys: revoking a
   * leaked key comes before disputing what it signed. Revoking again changes nothing,
   * except that it may give a reason where none was given, or turn `rotation` into
   * `compromise` (a leak found after a planned rotation); a compromise is never taken back.
   */
  revokeKey(sourceId: string, keyId: string, reason: RevocationReason | null = null): Promise<KeyRecord> {
    return this.#changes.run(() => {
      const key = this.#required(sourceId, keyId)
      if (key.state !== 'revoked') {
        this.#changes.touch(key, this.#changes.current.keys)
        key.state = 'revoked'
        key.revoked_at = this.#iso()
        key.revocation_reason = reason
        this.#pruneRevoked(this.keysOf(sourceId), REGISTRY_LIMITS.revokedKeysPerSource)
      } else if (reason !== null && reason !== key.revocation_reason) {
        if (key.revocation_reason === 'compromise') throw new ApiError('invalid_key_state', 'this key was revoked for compromise, which is never taken back')
        this.#changes.touch(key, this.#changes.current.keys)
        key.revocation_reason = reason
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
    return this.#changes.run(() => {
      const { source_id: sourceId, creator_id: creatorId } = input.source
      this.disputableKey(sourceId, input.keyId)
      this.#disputes.checkCanOpen(sourceId, creatorId, input.signals.map((s) => s.signal_id))
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
      const change = this.#changes.current
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
   * another resolution note, is refused. `afterSeq`: the signal log's last seq as it is
   * accepted, after which renters receive its events (never before its own signals;
   * without it, right after the greatest of them).
   */
  resolveDispute(sourceId: string, disputeId: string, outcome: 'accepted' | 'rejected', resolution: string | null, afterSeq?: number): Promise<DisputeRecord> {
    return this.#changes.run(() => {
      const record = this.#disputes.get(sourceId, disputeId)
      if (record === undefined) throw new ApiError('not_found', 'no such dispute for this source')
      if (record.state === outcome && (resolution === null || resolution === record.resolution)) return record
      if (record.state !== 'open') throw new ApiError('invalid_dispute_state', `this dispute was already ${record.state}, and a decision is final`)
      const change = this.#changes.current
      this.#changes.touch(record, change.disputes)
      record.state = outcome
      record.resolved_at = this.#iso()
      record.resolution = resolution
      if (outcome === 'accepted') {
        record.after_seq = Math.max(afterSeq ?? 0, greatestSignalSeq(record))
        record.accept_order = this.#disputes.nextAcceptOrder()
        change.undo.push(this.#disputes.markDisputed(record))
      }
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

  /** The source's accepted disputes, once recorded, in the order renters receive them: by after_seq, then accept_order. */
  acceptedDisputesOf(sourceId: string): readonly DisputeRecord[] {
    return this.#disputes.acceptedOf(sourceId)
  }

  /** Every dispute of every source, in the order they were opened (at most DISPUTE_LIMITS.total). */
  allDisputes(): DisputeRecord[] {
    return this.#disputes.all()
  }

  /**
   * Calls `listener` with the disputes of each recorded change that opened or resolved
   * some (the receipts follow them); returns how to stop. A listener must not throw.
   */
  /**
   * Told the ids of tokens revoked by each recorded change, so that what a token opened
   * (event streams) is closed at once; returns how to stop. On the key-value port this is
   * the registry's change watch, in every process.
   */
  watchRevocations(listener: (tokenIds: readonly string[]) => void): () => void {
    this.#revocationWatchers.add(listener)
    return () => void this.#revocationWatchers.delete(listener)
  }

  /** Whether the token of this id authenticates still (false once revoked, or unknown). */
  tokenLive(tokenId: string): boolean {
    return this.#tokens.get(tokenId)?.revoked_at === null
  }

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
  settle(): Promise<void> {
    return this.#changes.settle()
  }
}
