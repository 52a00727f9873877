import type { AgentRecord, KeyRecord, RegistrySnapshot, SourceRecord, TokenRecord } from './records.js'

/** One change of the registry: records written whole (new or changed) and key records dropped. */
export interface RegistryChange {
  readonly tokens: TokenRecord[]
  readonly agents: AgentRecord[]
  readonly sources: SourceRecord[]
  readonly keys: KeyRecord[]
  readonly droppedKeys: string[]
}

/**
 * Where the registry keeps its state. The embedded adapter is a snapshot and a change
 * log in DATA_DIR (`registry-file.ts`); a cluster adapter would be a NATS KV bucket.
 */
export interface RegistryStore {
  /** The state as last recorded, or undefined for a new store. */
  load(): Promise<RegistrySnapshot | undefined>
  /**
   * Durably records `change`; resolves only once it would survive a crash. The change's
   * records are read before the first await. `current` gives the whole state, for an
   * adapter that rewrites it now and then instead of keeping every change.
   */
  append(change: RegistryChange, current: () => RegistrySnapshot): Promise<void>
}

/** Applies `change` to `snapshot` in place: a record replaces the one with its id. */
export function applyChange(snapshot: RegistrySnapshot, change: RegistryChange): void {
  upsert(snapshot.tokens, change.tokens, (r) => r.sha256)
  upsert(snapshot.agents, change.agents, (r) => r.agent_id)
  upsert(snapshot.sources, change.sources, (r) => r.source_id)
  upsert(snapshot.keys, change.keys, (r) => r.key_id)
  if (change.droppedKeys.length > 0) {
    const dropped = new Set(change.droppedKeys)
    snapshot.keys = snapshot.keys.filter((k) => !dropped.has(k.key_id))
  }
}

function upsert<T>(records: T[], changed: readonly T[], id: (r: T) => string): void {
  if (changed.length === 0) return
  const at = new Map(records.map((r, i) => [id(r), i]))
  for (const r of changed) {
    const i = at.get(id(r))
    if (i === undefined) {
      at.set(id(r), records.length)
      records.push(r)
    } else records[i] = r
  }
}
