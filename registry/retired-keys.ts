import { createHash } from 'node:crypto'
import type { RetiredKey } from './records.js'

/**
 * Fingerprints kept per source of revoked keys whose records were dropped. About 30 bytes
 * each in the file and 60 in memory, so a source can rotate weekly for twenty years
 * before its oldest fingerprint goes; the bound keeps the registry finite all the same.
 */
export const RETIRED_KEYS_PER_SOURCE = 1024

/**
 * The public keys a source revoked long ago, by fingerprint: revocation is forward-only
 * (spec 3.1), so a key stays refused at registration after its revoked record is
 * dropped to keep rotation from running into a wall. Per source, oldest first; past
 * the bound the oldest fingerprint goes, by the same rule in memory and on load, so
 * the change log records only additions.
 */
export class RetiredKeys {
  readonly #bySource = new Map<string, Set<string>>()

  constructor(entries: readonly RetiredKey[] = []) {
    for (const e of entries) this.add(e.source_id, e.fingerprint)
  }

  /** SHA-256 of the 32 raw public-key bytes, first 16 bytes, base64url: collisions are out of reach. */
  static fingerprint(publicKey: Uint8Array): string {
    return createHash('sha256').update(publicKey).digest().subarray(0, 16).toString('base64url')
  }

  has(sourceId: string, fingerprint: string): boolean {
    return this.#bySource.get(sourceId)?.has(fingerprint) === true
  }

  add(sourceId: string, fingerprint: string): void {
    let set = this.#bySource.get(sourceId)
    if (set === undefined) this.#bySource.set(sourceId, (set = new Set()))
    set.add(fingerprint)
    if (set.size > RETIRED_KEYS_PER_SOURCE) set.delete(set.values().next().value as string)
  }

  /** A copy of one source's fingerprints, to put back with `restore` (an undone change). */
  copyOf(sourceId: string): Set<string> | undefined {
    const set = this.#bySource.get(sourceId)
    return set === undefined ? undefined : new Set(set)
  }

  restore(sourceId: string, copy: Set<string> | undefined): void {
    if (copy === undefined) this.#bySource.delete(sourceId)
    else this.#bySource.set(sourceId, copy)
  }

  /** Every fingerprint, each source's oldest first: the order `add` needs to rebuild this. */
  entries(): RetiredKey[] {
    const out: RetiredKey[] = []
    for (const [source_id, set] of this.#bySource) for (const fingerprint of set) out.push({ source_id, fingerprint })
    return out
  }
}
