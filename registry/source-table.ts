import { ApiError, type Listing, type Manifest } from '../schemas/index.js'
import type { ChangeSet } from './change-set.js'
import { REGISTRY_LIMITS } from './limits.js'
import { OwnerIndex } from './owner-index.js'
import { newId, type AgentRecord, type SourceRecord } from './records.js'

/**
 * Manifest fields a source keeps for life. The archetype says what kind of source it is
 * and the schema version what its payloads look like: renters chose the source for
 * both, so a source of another kind is a new source, not an edit of this one.
 */
const FIXED_MANIFEST_FIELDS = ['archetype', 'schema_version'] as const

/**
 * Sources, live and retired, indexed by agent and by creator. Changes are made inside
 * the registry's change under way (`changes`), which records them or undoes them.
 * Records change in place: requests in flight hold them and must see a new max_rate or
 * a retirement.
 */
export class SourceTable {
  readonly #changes: ChangeSet
  /** By source id, oldest first. */
  readonly #records: Map<string, SourceRecord>
  readonly #byAgent = new OwnerIndex()
  readonly #byCreator = new OwnerIndex()
  /** The retired among each agent's sources: they keep their records, not their slots. */
  readonly #retiredByAgent = new OwnerIndex()

  constructor(changes: ChangeSet, records: readonly SourceRecord[] = []) {
    this.#changes = changes
    for (const s of records) {
      // Records kept before sources could change or retire have neither field.
      s.updated_at ??= null
      s.retired_at ??= null
    }
    this.#records = new Map(records.map((s) => [s.source_id, s]))
    for (const s of records) {
      this.#byAgent.add(s.agent_id, s.source_id)
      this.#byCreator.add(s.creator_id, s.source_id)
      if (s.retired_at !== null) this.#retiredByAgent.add(s.agent_id, s.source_id)
    }
  }

  /** Any source ever registered, retired ones included. */
  get(sourceId: string): SourceRecord | undefined {
    return this.#records.get(sourceId)
  }

  /** Every source, oldest first. */
  all(): IterableIterator<SourceRecord> {
    return this.#records.values()
  }

  /** One agent's sources, oldest first. */
  ofAgent(agentId: string): SourceRecord[] {
    return this.#list(this.#byAgent.of(agentId))
  }

  /** One creator's sources over all its agents, oldest first. */
  ofCreator(creatorId: string): SourceRecord[] {
    return this.#list(this.#byCreator.of(creatorId))
  }

  #list(ids: ReadonlySet<string>): SourceRecord[] {
    return [...ids].map((id) => this.#records.get(id) as SourceRecord)
  }

  /** Slots the agent's live sources take. */
  slotsUsed(agentId: string): number {
    return this.#byAgent.of(agentId).size - this.#retiredByAgent.of(agentId).size
  }

  /** Inside a change. Registers a source on one of the agent's open slots. */
  create(agent: AgentRecord, manifest: Manifest, listing: Listing, now: string): SourceRecord {
    if (this.slotsUsed(agent.agent_id) >= agent.slots) throw new ApiError('no_open_slot', `agent ${agent.agent_id} has no open slot`)
    if (this.#records.size >= REGISTRY_LIMITS.sources) throw new ApiError('limit_exceeded', `at most ${REGISTRY_LIMITS.sources} sources: ask the operator`)
    if (this.#retiredByAgent.of(agent.agent_id).size >= REGISTRY_LIMITS.retiredSourcesPerAgent) {
      throw new ApiError('limit_exceeded', `agent ${agent.agent_id} keeps ${REGISTRY_LIMITS.retiredSourcesPerAgent} retired sources, the most an agent keeps: ask the operator for another agent`)
    }
    const source: SourceRecord = {
      source_id: newId('src'),
      agent_id: agent.agent_id,
      creator_id: agent.creator_id,
      manifest,
      listing,
      created_at: now,
      flagged_for_review_at: null,
      updated_at: null,
      retired_at: null,
    }
    this.#changes.put(this.#records, source.source_id, source)
    this.#changes.group(this.#byAgent, source.agent_id, source.source_id)
    this.#changes.group(this.#byCreator, source.creator_id, source.source_id)
    this.#changes.current.sources.push(source)
    return source
  }

  /**
   * Inside a change. Replaces the manifest, the listing or both. The manifest is checked
   * against its schema and the rate ceiling by the caller, as at registration; here, that
   * it keeps the fields a source keeps for life.
   */
  update(sourceId: string, changes: { manifest?: Manifest; listing?: Listing }, now: string): SourceRecord {
    const source = this.live(sourceId)
    const { manifest, listing } = changes
    if (manifest !== undefined) {
      for (const field of FIXED_MANIFEST_FIELDS) {
        if (manifest[field] !== source.manifest[field]) {
          throw new ApiError('invalid_manifest', `manifest.${field} cannot change (it is ${JSON.stringify(source.manifest[field])}): a source of another kind is a new source`)
        }
      }
    }
    this.#changes.touch(source, this.#changes.current.sources)
    if (manifest !== undefined) source.manifest = manifest
    if (listing !== undefined) source.listing = listing
    source.updated_at = now
    return source
  }

  /** Inside a change. Frees the source's slot for good; retiring again changes nothing. */
  retire(sourceId: string, now: string): SourceRecord {
    const source = this.#records.get(sourceId)
    if (source === undefined) throw new ApiError('not_found', 'no such source')
    if (source.retired_at !== null) return source
    this.#changes.touch(source, this.#changes.current.sources)
    source.retired_at = now
    this.#changes.group(this.#retiredByAgent, source.agent_id, source.source_id)
    return source
  }

  /** The source, for a change that only a live source takes: a retired one is `409 source_retired`. */
  live(sourceId: string): SourceRecord {
    const source = this.#records.get(sourceId)
    if (source === undefined) throw new ApiError('not_found', 'no such source')
    if (source.retired_at !== null) throw new ApiError('source_retired', `this source was retired at ${source.retired_at}; register a new source`)
    return source
  }
}
