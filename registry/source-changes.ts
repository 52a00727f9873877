import { ApiError, type Listing, type Manifest, type RevocationReason } from '../schemas/index.js'
import { REGISTRY_LIMITS } from './limits.js'
import { newId, type KeyRecord } from './records.js'
import type { SourceEntry } from './registry-entries.js'
import { fingerprint, RETIRED_KEYS_PER_SOURCE } from './retired-keys.js'

/**
 * The changes of one source's entry, as pure functions from the entry as stored to the
 * entry to write (undefined: nothing to write). Each is one write of the entry, so what
 * it keeps (one active key, the bounds on keys) holds whatever other processes do.
 */

/**
 * Manifest fields a source keeps for life. The archetype says what kind of source it is
 * and the schema version what its payloads look like: renters chose the source for
 * both, so a source of another kind is a new source, not an edit of this one.
 */
const FIXED_MANIFEST_FIELDS = ['archetype', 'schema_version'] as const

/**
 * Replaces the manifest, the listing or both. The manifest is checked against its schema
 * and the rate ceiling by the caller, as at registration; here, that it keeps the fields
 * a source keeps for life.
 */
export function withSourceChanges(entry: SourceEntry, changes: { manifest?: Manifest; listing?: Listing }, now: string): SourceEntry {
  const { source } = entry
  const { manifest, listing } = changes
  if (manifest !== undefined) {
    for (const field of FIXED_MANIFEST_FIELDS) {
      if (manifest[field] !== source.manifest[field]) {
        throw new ApiError('invalid_manifest', `manifest.${field} cannot change (it is ${JSON.stringify(source.manifest[field])}): a source of another kind is a new source`)
      }
    }
  }
  return { ...entry, source: { ...source, manifest: manifest ?? source.manifest, listing: listing ?? source.listing, updated_at: now } }
}

/** Flags the source for review after sustained over-rate; once. */
export function withFlag(entry: SourceEntry, now: string): SourceEntry | undefined {
  return entry.source.flagged_for_review_at !== null ? undefined : { ...entry, source: { ...entry.source, flagged_for_review_at: now } }
}

function withKey(entry: SourceEntry, record: KeyRecord): SourceEntry {
  return { ...entry, keys: entry.keys.map((k) => (k.key_id === record.key_id ? record : k)) }
}

function required(entry: SourceEntry, keyId: string): KeyRecord {
  const key = entry.keys.find((k) => k.key_id === keyId)
  if (key === undefined) throw new ApiError('not_found', 'no such key for this source')
  return key
}

/** Notes that a pending key signed a test signal that was accepted; once. */
export function withTested(entry: SourceEntry, keyId: string, now: string): SourceEntry | undefined {
  const key = entry.keys.find((k) => k.key_id === keyId)
  return key === undefined || key.tested_at !== null ? undefined : withKey(entry, { ...key, tested_at: now })
}

/** Adds a pending key; refused past the bound of live keys, and for a public key the source holds or revoked. */
export function addKeyTo(entry: SourceEntry, publicKey: Uint8Array, now: string): { next: SourceEntry; record: KeyRecord } {
  const encoded = Buffer.from(publicKey).toString('base64url')
  const live = entry.keys.filter((k) => k.state !== 'revoked')
  if (live.length >= REGISTRY_LIMITS.liveKeysPerSource) {
    throw new ApiError('limit_exceeded', `a source holds at most ${REGISTRY_LIMITS.liveKeysPerSource} keys that are not revoked: revoke one first`)
  }
  if (entry.keys.some((k) => k.public_key === encoded)) throw new ApiError('key_exists', 'this public key is already registered for the source')
  if (entry.retired_keys.includes(fingerprint(publicKey))) {
    throw new ApiError('key_exists', 'this public key was revoked for the source, and revocation is forward-only: register a new key')
  }
  const record: KeyRecord = {
    key_id: newId('key'),
    source_id: entry.source.source_id,
    state: 'pending',
    public_key: encoded,
    created_at: now,
    tested_at: null,
    promoted_at: null,
    grace_at: null,
    revoked_at: null,
    revocation_reason: null,
  }
  const pruned = pruneRevoked(entry, REGISTRY_LIMITS.revokedKeysPerSource - 1)
  return { next: { ...pruned, keys: [...pruned.keys, record] }, record }
}

/** pending (and tested) → active; the active key, if any, to grace, in the same write. */
export function promoteKeyIn(entry: SourceEntry, keyId: string, now: string): SourceEntry {
  const key = required(entry, keyId)
  if (key.state !== 'pending') throw new ApiError('invalid_key_state', `only a pending key can be promoted; this key is ${key.state}`)
  if (key.tested_at === null) throw new ApiError('key_not_tested', 'send a test signal signed with this key before promoting it')
  const keys = entry.keys.map((k): KeyRecord => {
    if (k.key_id === keyId) return { ...k, state: 'active', promoted_at: now }
    return k.state === 'active' ? { ...k, state: 'grace', grace_at: now } : k
  })
  return { ...entry, keys }
}

/** Any state → revoked, forward-only; a repeat may add a reason or turn `rotation` into `compromise`, never take a compromise back. */
export function revokeKeyIn(entry: SourceEntry, keyId: string, reason: RevocationReason | null, now: string): { next: SourceEntry | undefined; record: KeyRecord } {
  const key = required(entry, keyId)
  if (key.state !== 'revoked') {
    const record: KeyRecord = { ...key, state: 'revoked', revoked_at: now, revocation_reason: reason }
    return { next: pruneRevoked(withKey(entry, record), REGISTRY_LIMITS.revokedKeysPerSource), record }
  }
  if (reason === null || reason === key.revocation_reason) return { next: undefined, record: key }
  if (key.revocation_reason === 'compromise') throw new ApiError('invalid_key_state', 'this key was revoked for compromise, which is never taken back')
  const record: KeyRecord = { ...key, revocation_reason: reason }
  return { next: withKey(entry, record), record }
}

/**
 * Drops the revoked records revoked first (ties by listing order) until at most `keep`
 * remain, keeping the fingerprint of each, so its public key stays refused; past
 * RETIRED_KEYS_PER_SOURCE fingerprints the oldest goes.
 */
function pruneRevoked(entry: SourceEntry, keep: number): SourceEntry {
  const revoked = entry.keys.filter((k) => k.state === 'revoked')
  if (revoked.length <= keep) return entry
  const dropped = [...revoked].sort((a, b) => ((a.revoked_at ?? '') < (b.revoked_at ?? '') ? -1 : (a.revoked_at ?? '') > (b.revoked_at ?? '') ? 1 : 0)).slice(0, revoked.length - keep)
  const gone = new Set(dropped.map((k) => k.key_id))
  const retired = [...entry.retired_keys, ...dropped.map((k) => fingerprint(Buffer.from(k.public_key, 'base64url')))]
  return { ...entry, keys: entry.keys.filter((k) => !gone.has(k.key_id)), retired_keys: retired.slice(-RETIRED_KEYS_PER_SOURCE) }
}
