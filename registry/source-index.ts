import { OrderedRecords } from './ordered-records.js'
import { OwnerIndex } from './owner-index.js'
import type { AgentRecord, KeyRecord, SourceRecord } from './records.js'
import type { AgentEntry, SourceEntry } from './registry-entries.js'

/** A key as the hot path needs it: the record plus the decoded public key. */
export interface LiveKey {
  /**
   * The key's record as last stored. The holder stays the same object while the key is
   * known and the index replaces the record in it on each change, so a request in
   * flight that holds the key sees a revocation made meanwhile, by any process.
   */
  readonly record: KeyRecord
  readonly publicKey: Uint8Array
}

interface KeyHolder {
  record: KeyRecord
  readonly publicKey: Uint8Array
}

interface AgentInfo {
  readonly entry: AgentEntry
  /** Source id → retired_at (null while live). */
  readonly slots: ReadonlyMap<string, string | null>
  readonly live: number
  readonly retired: number
}

/**
 * Agents, sources and keys as this process knows them from the registry bucket, with
 * the look-ups the requests make: by id, by agent, by creator. A source is one only once
 * its agent's entry names it (a source entry it does not name is a creation that did not
 * finish); whether it is retired is the agent entry's to say, since freeing the slot and
 * retiring the source are one write there.
 */
export class SourceIndex {
  readonly #agents = new OrderedRecords<AgentRecord>()
  readonly #agentInfo = new Map<string, AgentInfo>()
  readonly #entries = new Map<string, SourceEntry>()
  readonly #sources = new OrderedRecords<SourceRecord>()
  readonly #byCreator = new OwnerIndex()
  readonly #keys = new Map<string, KeyHolder>()
  readonly #keysBySource = new Map<string, KeyHolder[]>()
  readonly #fingerprints = new Map<string, ReadonlySet<string>>()

  get agentCount(): number {
    return this.#agents.size
  }

  get sourceCount(): number {
    return this.#sources.size
  }

  agent(agentId: string): AgentRecord | undefined {
    return this.#agents.get(agentId)
  }

  agentEntry(agentId: string): AgentEntry | undefined {
    return this.#agentInfo.get(agentId)?.entry
  }

  agents(): readonly AgentRecord[] {
    return this.#agents.list()
  }

  slotsUsed(agentId: string): number {
    return this.#agentInfo.get(agentId)?.live ?? 0
  }

  source(sourceId: string): SourceRecord | undefined {
    return this.#sources.get(sourceId)
  }

  /** The stored entry of a source that is one (named by its agent). */
  sourceEntry(sourceId: string): SourceEntry | undefined {
    return this.#sources.has(sourceId) ? this.#entries.get(sourceId) : undefined
  }

  sources(): readonly SourceRecord[] {
    return this.#sources.list()
  }

  ofAgent(agentId: string): SourceRecord[] {
    const info = this.#agentInfo.get(agentId)
    if (info === undefined) return []
    const out: SourceRecord[] = []
    for (const id of info.slots.keys()) {
      const source = this.#sources.get(id)
      if (source !== undefined) out.push(source)
    }
    return out
  }

  ofCreator(creatorId: string): SourceRecord[] {
    const order = (s: SourceRecord) => this.#entries.get(s.source_id)?.order ?? 0
    const list = [...this.#byCreator.of(creatorId)].map((id) => this.#sources.get(id) as SourceRecord)
    return list.sort((a, b) => (a.created_at !== b.created_at ? (a.created_at < b.created_at ? -1 : 1) : order(a) - order(b)))
  }

  keysOf(sourceId: string): KeyRecord[] {
    return (this.#keysBySource.get(sourceId) ?? []).map((k) => k.record)
  }

  key(sourceId: string, keyId: string): LiveKey | undefined {
    const key = this.#keys.get(keyId)
    return key !== undefined && key.record.source_id === sourceId ? key : undefined
  }

  retiredFingerprint(sourceId: string, fingerprint: string): boolean {
    return this.#fingerprints.get(sourceId)?.has(fingerprint) === true
  }

  putAgent(entry: AgentEntry): void {
    const id = entry.agent.agent_id
    const before = this.#agentInfo.get(id)
    const slots = new Map(entry.sources.map((s) => [s.source_id, s.retired_at]))
    let live = 0
    for (const retiredAt of slots.values()) if (retiredAt === null) live++
    this.#agentInfo.set(id, { entry, slots, live, retired: slots.size - live })
    this.#agents.set(id, entry.agent, entry.agent.created_at, entry.order)
    for (const sourceId of slots.keys()) this.#refresh(sourceId)
    for (const sourceId of before?.slots.keys() ?? []) if (!slots.has(sourceId)) this.#refresh(sourceId)
  }

  retiredOf(agentId: string): number {
    return this.#agentInfo.get(agentId)?.retired ?? 0
  }

  removeAgent(agentId: string): void {
    const before = this.#agentInfo.get(agentId)
    if (before === undefined) return
    this.#agentInfo.delete(agentId)
    this.#agents.delete(agentId)
    for (const sourceId of before.slots.keys()) this.#refresh(sourceId)
  }

  putSource(entry: SourceEntry): void {
    const id = entry.source.source_id
    this.#entries.set(id, entry)
    const holders: KeyHolder[] = []
    const kept = new Set<string>()
    for (const record of entry.keys) {
      let holder = this.#keys.get(record.key_id)
      if (holder === undefined || holder.record.source_id !== id) {
        holder = { record, publicKey: Buffer.from(record.public_key, 'base64url') }
        this.#keys.set(record.key_id, holder)
      } else holder.record = record
      holders.push(holder)
      kept.add(record.key_id)
    }
    for (const old of this.#keysBySource.get(id) ?? []) if (!kept.has(old.record.key_id)) this.#keys.delete(old.record.key_id)
    this.#keysBySource.set(id, holders)
    this.#fingerprints.set(id, new Set(entry.retired_keys))
    this.#refresh(id)
  }

  removeSource(sourceId: string): void {
    this.#entries.delete(sourceId)
    for (const old of this.#keysBySource.get(sourceId) ?? []) this.#keys.delete(old.record.key_id)
    this.#keysBySource.delete(sourceId)
    this.#fingerprints.delete(sourceId)
    this.#refresh(sourceId)
  }

  /** Lists the source, as its agent's entry says, or drops it when it is no source. */
  #refresh(sourceId: string): void {
    const entry = this.#entries.get(sourceId)
    const slot = entry === undefined ? undefined : this.#agentInfo.get(entry.source.agent_id)?.slots
    const retiredAt = slot?.get(sourceId)
    if (entry === undefined || retiredAt === undefined) {
      const held = this.#sources.get(sourceId)
      if (held !== undefined) this.#byCreator.delete(held.creator_id, sourceId)
      this.#sources.delete(sourceId)
      return
    }
    const view = entry.source.retired_at === retiredAt ? entry.source : { ...entry.source, retired_at: retiredAt }
    this.#sources.set(sourceId, view, view.created_at, entry.order)
    this.#byCreator.add(view.creator_id, sourceId)
  }
}
