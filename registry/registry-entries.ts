import type { AgentRecord, DisputeRecord, KeyRecord, SourceRecord, TokenRecord } from './records.js'

/**
 * How the registry lies in its KV bucket. Every change the registry makes is one write
 * of one entry, so it needs no transaction across keys and a second process sees it
 * whole or not at all:
 *
 * - `token.<token_id>`: one token record. Creation is create-if-absent (a token id is
 *   never given twice), revocation an update at the expected revision.
 * - `agent.<agent id, base64url>`: the agent record and the list of its sources, each
 *   with the time it was retired (null while live). Taking a slot (a new source),
 *   freeing one (a retirement) and changing the slots are each one update of this entry
 *   at its expected revision, so two processes can never fill one slot twice. Agent ids
 *   are chosen by the operator and may hold `.` and `:`, which a key cannot: hence the
 *   encoding.
 * - `source.<source_id>`: the source record, all its key records, and the fingerprints
 *   of its dropped revoked keys. A promotion (the old active key to grace, the new one
 *   active), a revocation with the prune it brings, and "one active key per source" are
 *   one update of this entry. A source entry that its agent's list does not name is a
 *   creation that did not finish (its agent's update failed or the process died): it
 *   is no source, and nothing reads it.
 * - `disputes.<source_id>`: the source's disputes, oldest first. Opening and resolving
 *   a dispute touch only the source's disputes (whether a signal is already named, the
 *   per-source bound, the acceptance order), so one entry per source keeps each of them
 *   one update; apart from the source entry because disputes are large (up to 16 of
 *   about 25 KB) and key changes, which are frequent, should not rewrite them.
 */
export const TOKEN_PREFIX = 'token.'
export const AGENT_PREFIX = 'agent.'
export const SOURCE_PREFIX = 'source.'
export const DISPUTES_PREFIX = 'disputes.'

export interface AgentSlot {
  readonly source_id: string
  /** Set when the source was retired: it keeps its place in the list, not its slot. */
  readonly retired_at: string | null
}

/** Where a token, agent or source is listed among its kind (OrderedRecords). */
interface Ordered {
  readonly order: number
}

export interface TokenEntry extends Ordered {
  readonly token: TokenRecord
}

export interface AgentEntry extends Ordered {
  readonly agent: AgentRecord
  /** Every source registered on the agent, oldest first. */
  readonly sources: readonly AgentSlot[]
}

export interface SourceEntry extends Ordered {
  /** retired_at is the agent entry's, which decides it; here it is always null. */
  readonly source: SourceRecord
  /** Oldest first. */
  readonly keys: readonly KeyRecord[]
  /** Fingerprints of dropped revoked keys, oldest first, at most RETIRED_KEYS_PER_SOURCE. */
  readonly retired_keys: readonly string[]
}

export interface DisputesEntry {
  /** Oldest first. */
  readonly disputes: readonly DisputeRecord[]
}

export const tokenKey = (tokenId: string): string => TOKEN_PREFIX + tokenId
export const agentKey = (agentId: string): string => AGENT_PREFIX + Buffer.from(agentId).toString('base64url')
export const sourceKey = (sourceId: string): string => SOURCE_PREFIX + sourceId
export const disputesKey = (sourceId: string): string => DISPUTES_PREFIX + sourceId

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function encodeEntry(value: TokenEntry | AgentEntry | SourceEntry | DisputesEntry): Uint8Array {
  return encoder.encode(JSON.stringify(value))
}

export function decodeEntry<T>(bytes: Uint8Array): T {
  return JSON.parse(decoder.decode(bytes)) as T
}
