import type { Disputes } from './disputes.js'
import type { DisputeRecord } from './records.js'
import {
  AGENT_PREFIX,
  agentKey,
  decodeEntry,
  DISPUTES_PREFIX,
  SOURCE_PREFIX,
  TOKEN_PREFIX,
  type AgentEntry,
  type DisputesEntry,
  type SourceEntry,
  type TokenEntry,
} from './registry-entries.js'
import type { SourceIndex } from './source-index.js'
import type { TokenIndex } from './token-index.js'

/** Every entry of the bucket as last taken, by key, decoded, with its revision. */
export type HeldEntries = Map<string, { readonly value: unknown; readonly revision: number }>

/** A change to take: a value written by this process (decoded already), one read from the bucket (bytes), or a deletion. */
export type RegistryChange =
  | { readonly key: string; readonly operation: 'PUT'; readonly revision: number; readonly value: unknown }
  | { readonly key: string; readonly operation: 'PUT'; readonly revision: number; readonly bytes: Uint8Array }
  | { readonly key: string; readonly operation: 'DEL'; readonly revision: number }

export interface RegistryIndexes {
  readonly held: HeldEntries
  readonly tokens: TokenIndex
  readonly sources: SourceIndex
  readonly disputes: Disputes
}

/** What a change told: tokens it revoked, disputes it opened or decided. */
export interface Told {
  readonly revoked: string[]
  readonly disputes: DisputeRecord[]
}

/**
 * Takes one change of the registry bucket into the indexes, if it is newer than the
 * entry they hold (a change seen twice, from this process's write and then from the
 * watch, or late, changes nothing). Throws for a value that is no entry of its kind;
 * the indexes are then left as they were.
 */
export function applyEntry(index: RegistryIndexes, change: RegistryChange): Told | undefined {
  const { key } = change
  const held = index.held.get(key)
  if (held !== undefined && held.revision >= change.revision) return undefined
  if (change.operation === 'DEL') {
    if (held === undefined) return undefined
    index.held.delete(key)
    if (key.startsWith(TOKEN_PREFIX)) index.tokens.remove(key.slice(TOKEN_PREFIX.length))
    else if (key.startsWith(SOURCE_PREFIX)) index.sources.removeSource(key.slice(SOURCE_PREFIX.length))
    else if (key.startsWith(AGENT_PREFIX)) index.sources.removeAgent((held.value as AgentEntry).agent.agent_id)
    else if (key.startsWith(DISPUTES_PREFIX)) return { revoked: [], disputes: index.disputes.replace(key.slice(DISPUTES_PREFIX.length), []) }
    return undefined
  }
  const value = 'value' in change ? change.value : decodeEntry<unknown>(change.bytes)
  if (key.startsWith(TOKEN_PREFIX)) {
    const entry = checkToken(value, key)
    index.held.set(key, { value: entry, revision: change.revision })
    return { revoked: index.tokens.put(entry.token, entry.order) ? [entry.token.token_id] : [], disputes: [] }
  }
  if (key.startsWith(AGENT_PREFIX)) {
    const entry = value as AgentEntry
    if (typeof entry?.agent?.agent_id !== 'string' || agentKey(entry.agent.agent_id) !== key || !Array.isArray(entry.sources)) throw new Error(`${key} is no agent entry`)
    index.held.set(key, { value: entry, revision: change.revision })
    index.sources.putAgent(entry)
    return undefined
  }
  if (key.startsWith(SOURCE_PREFIX)) {
    const entry = checkSource(value, key)
    index.held.set(key, { value: entry, revision: change.revision })
    index.sources.putSource(entry)
    return undefined
  }
  if (key.startsWith(DISPUTES_PREFIX)) {
    const entry = value as DisputesEntry
    if (!Array.isArray(entry?.disputes)) throw new Error(`${key} is no disputes entry`)
    index.held.set(key, { value: entry, revision: change.revision })
    return { revoked: [], disputes: index.disputes.replace(key.slice(DISPUTES_PREFIX.length), entry.disputes) }
  }
  throw new Error(`${key} is no registry key`)
}

function checkToken(value: unknown, key: string): TokenEntry {
  const entry = value as TokenEntry
  const token = entry?.token
  if (typeof token?.token_id !== 'string' || TOKEN_PREFIX + token.token_id !== key || typeof token.sha256 !== 'string') throw new Error(`${key} is no token entry`)
  // Records kept before tokens could be revoked have no revoked_at.
  return token.revoked_at === undefined ? { ...entry, token: { ...token, revoked_at: null } } : entry
}

function checkSource(value: unknown, key: string): SourceEntry {
  const entry = value as SourceEntry
  const source = entry?.source
  if (typeof source?.source_id !== 'string' || SOURCE_PREFIX + source.source_id !== key || !Array.isArray(entry.keys) || !Array.isArray(entry.retired_keys)) {
    throw new Error(`${key} is no source entry`)
  }
  return entry
}
