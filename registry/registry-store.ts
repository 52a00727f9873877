import type { AgentRecord, DisputeRecord, KeyRecord, RegistrySnapshot, RetiredKey, SourceRecord, TokenRecord } from './records.js'

/** One change of the registry: records written whole (new or changed) and key and token records dropped. */
export interface RegistryChange {
  readonly tokens: TokenRecord[]
  readonly agents: AgentRecord[]
  readonly sources: SourceRecord[]
  readonly keys: KeyRecord[]
  readonly droppedKeys: string[]
  /** Token ids. */
  readonly droppedTokens: string[]
  /** Fingerprints of the dropped keys, oldest first (absent in changes recorded before they were kept). */
  readonly retiredKeys?: RetiredKey[]
  /** New or resolved disputes (absent in changes recorded before disputes existed). */
  readonly disputes?: DisputeRecord[]
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

/**
 * The state after `changes`, applied in order on top of `snapshot` (a record replaces
 * the one with its id). Indexed once for all the changes, so a start that replays a
 * long log stays linear.
 */
export function replayChanges(snapshot: RegistrySnapshot | undefined, changes: readonly RegistryChange[]): RegistrySnapshot {
  const tokens = new Map((snapshot?.tokens ?? []).map((r) => [r.token_id, r]))
  const agents = new Map((snapshot?.agents ?? []).map((r) => [r.agent_id, r]))
  const sources = new Map((snapshot?.sources ?? []).map((r) => [r.source_id, r]))
  const keys = new Map((snapshot?.keys ?? []).map((r) => [r.key_id, r]))
  // Only ever added to: the registry drops the oldest past its bound as it loads them.
  const retired = [...(snapshot?.retired_keys ?? [])]
  const disputes = new Map((snapshot?.disputes ?? []).map((r) => [r.dispute_id, r]))
  for (const change of changes) {
    for (const r of change.tokens) tokens.set(r.token_id, r)
    for (const r of change.agents) agents.set(r.agent_id, r)
    for (const r of change.sources) sources.set(r.source_id, r)
    for (const r of change.keys) keys.set(r.key_id, r)
    for (const id of change.droppedKeys) keys.delete(id)
    // Absent in changes recorded before tokens could be revoked.
    for (const id of change.droppedTokens ?? []) tokens.delete(id)
    for (const r of change.retiredKeys ?? []) retired.push(r)
    for (const r of change.disputes ?? []) disputes.set(r.dispute_id, r)
  }
  return {
    version: 1,
    tokens: [...tokens.values()],
    agents: [...agents.values()],
    sources: [...sources.values()],
    keys: [...keys.values()],
    retired_keys: retired,
    disputes: [...disputes.values()],
  }
}
