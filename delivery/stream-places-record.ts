import { createHash } from 'node:crypto'
import type { KvBucketLimits, KvEntry } from '../storage/index.js'

/**
 * One process's entry in a rental's record: how many of the rental's streams it holds,
 * and until when (ms) the entry counts if the process does not write it again.
 */
export type HolderEntry = readonly [holder: string, count: number, expiresAt: number]

/** Characters of a holder's name: the record's size is bounded by it. */
export const HOLDER_MAX_CHARS = 100
/** Bytes of one entry, `["<holder>",<count>,<13 digits>],`, with room to spare. */
const ENTRY_BYTES = HOLDER_MAX_CHARS + 40
/** Bytes of a record around its entries. */
const RECORD_BYTES = 64
/** Every record's key starts so, the rest is the SHA-256 of the rental id (ids may hold characters a key cannot). */
export const RECORD_PREFIX = 'rental.'

const encoder = new TextEncoder()
const decoder = new TextDecoder()

export function placesKey(rentalId: string): string {
  return RECORD_PREFIX + createHash('sha256').update(rentalId).digest('hex')
}

/**
 * The bounds of the places bucket: a record per rental with a stream open (at most
 * `maxRentals`), each listing at most `maxPerRental` entries, since every entry a write
 * keeps holds at least one place and unexpired ones never hold more than the cap together.
 */
export function placesBucketLimits(maxRentals: number, maxPerRental: number): KvBucketLimits {
  return { maxKeys: maxRentals, maxValueBytes: RECORD_BYTES + ENTRY_BYTES * maxPerRental }
}

/** The entries a record lists; none for a value that is no such record (the next write replaces it). */
export function entriesOf(entry: KvEntry | null): HolderEntry[] {
  if (entry === null) return []
  try {
    const v = JSON.parse(decoder.decode(entry.value)) as { holders?: unknown }
    if (!Array.isArray(v.holders)) return []
    return v.holders.filter((h): h is HolderEntry => Array.isArray(h) && h.length === 3 && typeof h[0] === 'string' && Number.isSafeInteger(h[1]) && h[1] > 0 && Number.isSafeInteger(h[2]))
  } catch {
    return []
  }
}

/** The entries that still count at `now`: an entry not renewed by its expiry is a process that stopped (or lost the store), and its places are free. */
export function liveEntries(entries: readonly HolderEntry[], now: number): HolderEntry[] {
  return entries.filter((e) => e[2] > now)
}

/** When a record may be deleted: once its last entry expired. */
export function recordExpiry(entry: KvEntry): number {
  return Math.max(0, ...entriesOf(entry).map((e) => e[2]))
}

export function encodeEntries(entries: readonly HolderEntry[]): Uint8Array {
  return encoder.encode(JSON.stringify({ holders: entries }))
}
