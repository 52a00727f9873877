import { readFile, rename } from 'node:fs/promises'
import { join } from 'node:path'
import { isKvError, syncDir, type KvBucket } from '../storage/index.js'
import type { AgentRecord, DisputeRecord, KeyRecord, SourceRecord, TokenRecord } from './records.js'
import { agentKey, disputesKey, encodeEntry, sourceKey, tokenKey, type AgentEntry, type DisputesEntry, type SourceEntry, type TokenEntry } from './registry-entries.js'
import { RegistryError } from './registry-error.js'
import { RETIRED_KEYS_PER_SOURCE } from './retired-keys.js'

/**
 * The registry files of releases that kept the registry in DATA_DIR: a snapshot
 * (`registry.json`) and a log of the changes since (`registry.log`, one JSON line each,
 * with the snapshot generation it was written in). Read once, on the first start of a
 * release that keeps the registry in its KV bucket, then renamed with `.migrated`
 * appended, kept for the operator and never read again.
 */
export const LEGACY_FILES = ['registry.json', 'registry.log'] as const

/** Writes in flight while the old registry is copied into the bucket. */
const MIGRATION_WRITES_IN_FLIGHT = 256

interface LegacySnapshot {
  version: 1
  generation?: number
  tokens: TokenRecord[]
  agents: AgentRecord[]
  sources: SourceRecord[]
  keys: KeyRecord[]
  retired_keys?: Array<{ source_id: string; fingerprint: string }>
  disputes?: DisputeRecord[]
}

interface LegacyChange {
  tokens: TokenRecord[]
  agents: AgentRecord[]
  sources: SourceRecord[]
  keys: KeyRecord[]
  droppedKeys: string[]
  droppedTokens?: string[]
  retiredKeys?: Array<{ source_id: string; fingerprint: string }>
  disputes?: DisputeRecord[]
  generation?: number
}

/**
 * Copies the registry files in `dir`, if any, into `bucket`, then renames them. Each
 * entry is written with create-if-absent, so a start that stopped half-way (before the
 * rename) copies the rest the next time and changes nothing already copied. Resolves
 * with the number of entries the files made, or undefined when there were none.
 * RegistryError when the files hold something a start cannot use: they are left as they
 * were, for an operator.
 */
export async function migrateLegacyRegistry(dir: string, bucket: KvBucket): Promise<number | undefined> {
  const snapshot = await loadLegacy(dir)
  if (snapshot === undefined) return undefined
  let entries: Array<[string, Uint8Array]>
  try {
    entries = legacyEntries(snapshot)
  } catch (err) {
    throw new RegistryError(`the registry holds a record that cannot be loaded (${err instanceof Error ? err.message : String(err)})`, { cause: err })
  }
  for (let i = 0; i < entries.length; i += MIGRATION_WRITES_IN_FLIGHT) {
    await Promise.all(
      entries.slice(i, i + MIGRATION_WRITES_IN_FLIGHT).map(async ([key, value]) => {
        try {
          await bucket.create(key, value)
        } catch (err) {
          if (!isKvError(err, 'exists')) throw err
        }
      }),
    )
  }
  for (const name of LEGACY_FILES) {
    await rename(join(dir, name), join(dir, `${name}.migrated`)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err
    })
  }
  await syncDir(dir)
  return entries.length
}

/** The registry's entries for the bucket, as the old registry loaded its state. */
function legacyEntries(state: LegacySnapshot): Array<[string, Uint8Array]> {
  const out: Array<[string, Uint8Array]> = []
  state.tokens.forEach((t, order) => {
    const entry: TokenEntry = { token: { ...t, revoked_at: t.revoked_at ?? null }, order }
    out.push([tokenKey(t.token_id), encodeEntry(entry)])
  })
  const sourcesOf = groupBy(state.sources, (s) => s.agent_id)
  state.agents.forEach((agent, order) => {
    const sources = (sourcesOf.get(agent.agent_id) ?? []).map((s) => ({ source_id: s.source_id, retired_at: s.retired_at ?? null }))
    out.push([agentKey(agent.agent_id), encodeEntry({ agent, order, sources } satisfies AgentEntry)])
  })
  const keysOf = groupBy(state.keys, (k) => k.source_id)
  const retiredOf = groupBy(state.retired_keys ?? [], (r) => r.source_id)
  state.sources.forEach((s, order) => {
    const entry: SourceEntry = {
      source: { ...s, updated_at: s.updated_at ?? null, retired_at: null },
      order,
      keys: (keysOf.get(s.source_id) ?? []).map((k) => ({ ...k, revocation_reason: k.revocation_reason ?? null })),
      // Past the bound the oldest went, as the old registry applied it on load.
      retired_keys: [...new Set((retiredOf.get(s.source_id) ?? []).map((r) => r.fingerprint))].slice(-RETIRED_KEYS_PER_SOURCE),
    }
    out.push([sourceKey(s.source_id), encodeEntry(entry)])
  })
  for (const [sourceId, disputes] of groupBy(state.disputes ?? [], (d) => d.source_id)) {
    out.push([disputesKey(sourceId), encodeEntry({ disputes } satisfies DisputesEntry)])
  }
  return out
}

function groupBy<T>(list: readonly T[], keyOf: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>()
  for (const item of list) {
    const key = keyOf(item)
    let group = out.get(key)
    if (group === undefined) out.set(key, (group = []))
    group.push(item)
  }
  return out
}

/**
 * The state the files hold: the snapshot with the log's changes after it, a torn last
 * line (never acknowledged) left out, and lines of a generation older than the snapshot
 * (left behind it by a crash) skipped.
 */
async function loadLegacy(dir: string): Promise<LegacySnapshot | undefined> {
  const path = join(dir, 'registry.json')
  const logPath = join(dir, 'registry.log')
  const text = await readIfPresent(path)
  const snapshot = text === undefined ? undefined : parseSnapshot(text, path)
  const generation = snapshot?.generation ?? 0
  const log = await readIfPresent(logPath)
  if (log === undefined) return snapshot
  const changes: LegacyChange[] = []
  let start = 0
  for (let end = log.indexOf(10, start); end >= 0; end = log.indexOf(10, start)) {
    const line = parseChange(log.subarray(start, end))
    if (line === undefined) {
      // Only the last line can be torn; a bad line with more after it is damage.
      if (log.indexOf(10, end + 1) >= 0) throw new RegistryError(`${logPath}: damaged change at byte ${start}, with changes after it`)
      break
    }
    if ((line.generation ?? 0) >= generation) changes.push(line)
    start = end + 1
  }
  try {
    return replay(snapshot, changes)
  } catch (err) {
    throw new RegistryError(`${path} or ${logPath} holds a record that cannot be loaded (${err instanceof Error ? err.message : String(err)})`, { cause: err })
  }
}

/** The state after `changes`, applied in order on top of `snapshot` (a record replaces the one with its id). */
function replay(snapshot: LegacySnapshot | undefined, changes: readonly LegacyChange[]): LegacySnapshot {
  const tokens = new Map((snapshot?.tokens ?? []).map((r) => [r.token_id, r]))
  const agents = new Map((snapshot?.agents ?? []).map((r) => [r.agent_id, r]))
  const sources = new Map((snapshot?.sources ?? []).map((r) => [r.source_id, r]))
  const keys = new Map((snapshot?.keys ?? []).map((r) => [r.key_id, r]))
  const retired = [...(snapshot?.retired_keys ?? [])]
  const disputes = new Map((snapshot?.disputes ?? []).map((r) => [r.dispute_id, r]))
  for (const change of changes) {
    for (const r of change.tokens) tokens.set(r.token_id, r)
    for (const r of change.agents) agents.set(r.agent_id, r)
    for (const r of change.sources) sources.set(r.source_id, r)
    for (const r of change.keys) keys.set(r.key_id, r)
    for (const id of change.droppedKeys) keys.delete(id)
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

function parseSnapshot(text: Buffer, path: string): LegacySnapshot {
  let doc: Partial<LegacySnapshot> | null
  try {
    doc = JSON.parse(text.toString('utf8')) as Partial<LegacySnapshot> | null
  } catch (err) {
    throw new RegistryError(`${path} is not valid JSON`, { cause: err })
  }
  if (doc === null || typeof doc !== 'object' || doc.version !== 1) {
    throw new RegistryError(`${path}: unknown registry version ${String(doc?.version)}`)
  }
  for (const list of ['tokens', 'agents', 'sources', 'keys'] as const) {
    if (!Array.isArray(doc[list])) throw new RegistryError(`${path} has no ${list} list`)
  }
  return doc as LegacySnapshot
}

function parseChange(bytes: Buffer): LegacyChange | undefined {
  let line: Partial<LegacyChange> | null
  try {
    line = JSON.parse(bytes.toString('utf8')) as Partial<LegacyChange> | null
  } catch {
    return undefined
  }
  const lists = [line?.tokens, line?.agents, line?.sources, line?.keys, line?.droppedKeys]
  return lists.every((list) => Array.isArray(list)) ? (line as LegacyChange) : undefined
}

async function readIfPresent(path: string): Promise<Buffer | undefined> {
  try {
    return await readFile(path)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw err
  }
}
