/**
 * Options of the embedded journal: declared once, defaults filled in, checked at open
 * with messages that name the option and the fix. Unknown options are refused, so a
 * misspelt `fsyncIntervalMS` cannot silently fall back to a default.
 */
import type { FsyncPolicy } from '../log.js'
import { LogError } from '../log-error.js'
import type { TornTail } from './journal-recovery.js'

export interface JournalOptions {
  /** Folder the journal owns (created if missing). */
  dir: string
  fsync: FsyncPolicy
  /** For 'interval': how often written records are synced. Default: JOURNAL_DEFAULTS. */
  fsyncIntervalMs?: number
  /** Roll to a new segment file past this size. Default 64 MiB. */
  segmentBytes?: number
  /** How long a dedup id is remembered (0 turns deduplication off). */
  dedupWindowMs: number
  /**
   * Retention by age: a sealed segment is removed once its newest record is older than
   * this (JetStream: max_age). Default 7 days; Infinity keeps records whatever their age.
   */
  maxAgeMs?: number
  /**
   * Retention by size: the oldest sealed segments are removed while the segments held
   * exceed this many bytes (JetStream: max_bytes). Default 32 GiB; Infinity for no limit.
   */
  maxBytes?: number
  /**
   * Records younger than this are never removed by `maxAgeMs` or `maxBytes`, which yield
   * (the log then holds more than `maxBytes`): what the ingest state reads back at start
   * (the dedup window). Default 0.
   */
  keepNewerThanMs?: number
  /**
   * Retention: keep at most this many segments, deleting the oldest, whatever their age.
   * Only for best-effort logs (diagnostics): deleted records are gone for every consumer.
   * Default: unlimited.
   */
  maxSegments?: number
  /**
   * The memory tail (tail-ring.ts): the last records published are kept in memory, up to
   * about this many bytes and this many records, and reads at the log's end are served
   * from there instead of the segment files. 0 of either turns it off. Defaults: JOURNAL_DEFAULTS.
   */
  tailCacheBytes?: number
  tailCacheRecords?: number
  /** Clock, in ms since the epoch; for tests. */
  now?: () => number
  /** Told what the opening cut from a torn tail, for the operator's log. */
  onRepair?: (tail: TornTail) => void
  /** Told of trouble the journal rides out (a roll put off for want of a file descriptor). */
  onWarning?: (message: string, err: unknown) => void
}

export interface FilledJournalOptions {
  readonly dir: string
  readonly fsync: FsyncPolicy
  readonly fsyncIntervalMs: number
  readonly segmentBytes: number
  readonly dedupWindowMs: number
  readonly maxAgeMs: number
  readonly maxBytes: number
  readonly keepNewerThanMs: number
  readonly maxSegments: number
  readonly tailCacheBytes: number
  readonly tailCacheRecords: number
  readonly now: () => number
  readonly onRepair: (tail: TornTail) => void
  readonly onWarning: (message: string, err: unknown) => void
}

/**
 * Declared here, not in the service configuration: the journal is also opened without it
 * (tests, the ingest-error log's old segments). config/ takes the defaults of
 * JOURNAL_FSYNC_INTERVAL_MS and of the JOURNAL_RETENTION_* variables from here.
 *
 * Retention: 7 days by age, so a consumer down over a long weekend resumes with nothing
 * lost; 32 GiB by size, a bound on the disk a burst can take: 512 segments of 64 MiB,
 * 7 days of ~55 KB/s sustained (about 50 signals/s of 1 KB), or the first ~35 minutes of
 * a flood at the measured 16,000 accepted/s before the oldest records go.
 *
 * The memory tail: 8 MiB or 16,384 records, whichever is reached first, about 6 s of the
 * delivery benchmark's 1,000 signals/s of ~1 KB (and ~0.4 s of the ingest peak), which
 * covers consumers that follow the log's end (the delivery tail, the recorder, webhook
 * workers) with room for a pause; one further behind reads the files, as before.
 */
export const JOURNAL_DEFAULTS = {
  fsyncIntervalMs: 200,
  segmentBytes: 64 * 1024 * 1024,
  maxAgeMs: 7 * 24 * 60 * 60 * 1000,
  maxBytes: 32 * 1024 * 1024 * 1024,
  keepNewerThanMs: 0,
  maxSegments: Number.POSITIVE_INFINITY,
  tailCacheBytes: 8 * 1024 * 1024,
  tailCacheRecords: 16_384,
} as const

/** Slots of the memory tail are allocated up front: a bound on what a typo can cost. */
const MAX_TAIL_CACHE_RECORDS = 1_048_576

/** Below this a segment would hold a handful of records and rolls would dominate. */
const MIN_SEGMENT_BYTES = 1024

const KNOWN = new Set([
  'dir', 'fsync', 'fsyncIntervalMs', 'segmentBytes', 'dedupWindowMs', 'maxAgeMs', 'maxBytes', 'keepNewerThanMs', 'maxSegments', 'tailCacheBytes', 'tailCacheRecords', 'now', 'onRepair', 'onWarning',
])
const POLICIES: readonly FsyncPolicy[] = ['always', 'interval', 'never']

export function fillJournalOptions(opts: JournalOptions): FilledJournalOptions {
  if (typeof opts !== 'object' || opts === null) throw invalid('journal options must be an object')
  for (const key of Object.keys(opts)) {
    if (!KNOWN.has(key)) throw invalid(`unknown journal option "${key}"; known: ${[...KNOWN].join(', ')}`)
  }
  if (typeof opts.dir !== 'string' || opts.dir === '') {
    throw invalid('journal option "dir" must name a folder (e.g. DATA_DIR/log)')
  }
  if (!POLICIES.includes(opts.fsync)) {
    throw invalid(`journal option "fsync" must be one of ${POLICIES.join(', ')}`)
  }
  const fsyncIntervalMs = opts.fsyncIntervalMs ?? JOURNAL_DEFAULTS.fsyncIntervalMs
  if (!Number.isSafeInteger(fsyncIntervalMs) || fsyncIntervalMs < 1) {
    throw invalid('journal option "fsyncIntervalMs" must be a positive integer of milliseconds')
  }
  const segmentBytes = opts.segmentBytes ?? JOURNAL_DEFAULTS.segmentBytes
  if (!Number.isSafeInteger(segmentBytes) || segmentBytes < MIN_SEGMENT_BYTES) {
    throw invalid(`journal option "segmentBytes" must be an integer of at least ${MIN_SEGMENT_BYTES}`)
  }
  if (!Number.isSafeInteger(opts.dedupWindowMs) || opts.dedupWindowMs < 0) {
    throw invalid('journal option "dedupWindowMs" must be a non-negative integer of milliseconds')
  }
  const maxAgeMs = opts.maxAgeMs ?? JOURNAL_DEFAULTS.maxAgeMs
  if (maxAgeMs !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxAgeMs) || maxAgeMs < 1)) {
    throw invalid('journal option "maxAgeMs" must be a positive integer of milliseconds (Infinity for no age limit)')
  }
  const maxBytes = opts.maxBytes ?? JOURNAL_DEFAULTS.maxBytes
  if (maxBytes !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxBytes) || maxBytes < segmentBytes)) {
    throw invalid(`journal option "maxBytes" must be an integer of at least segmentBytes (${segmentBytes}), or Infinity for no size limit`)
  }
  const keepNewerThanMs = opts.keepNewerThanMs ?? JOURNAL_DEFAULTS.keepNewerThanMs
  if (!Number.isSafeInteger(keepNewerThanMs) || keepNewerThanMs < 0) {
    throw invalid('journal option "keepNewerThanMs" must be a non-negative integer of milliseconds')
  }
  const maxSegments = opts.maxSegments ?? JOURNAL_DEFAULTS.maxSegments
  if (maxSegments !== Number.POSITIVE_INFINITY && (!Number.isSafeInteger(maxSegments) || maxSegments < 1)) {
    throw invalid('journal option "maxSegments" must be a positive integer (leave it out for no limit)')
  }
  const tailCacheBytes = opts.tailCacheBytes ?? JOURNAL_DEFAULTS.tailCacheBytes
  if (!Number.isSafeInteger(tailCacheBytes) || tailCacheBytes < 0) {
    throw invalid('journal option "tailCacheBytes" must be a non-negative integer')
  }
  const tailCacheRecords = opts.tailCacheRecords ?? JOURNAL_DEFAULTS.tailCacheRecords
  if (!Number.isSafeInteger(tailCacheRecords) || tailCacheRecords < 0 || tailCacheRecords > MAX_TAIL_CACHE_RECORDS) {
    throw invalid(`journal option "tailCacheRecords" must be an integer from 0 (off) to ${MAX_TAIL_CACHE_RECORDS}`)
  }
  if (opts.now !== undefined && typeof opts.now !== 'function') {
    throw invalid('journal option "now" must be a function returning ms since the epoch')
  }
  for (const name of ['onRepair', 'onWarning'] as const) {
    if (opts[name] !== undefined && typeof opts[name] !== 'function') throw invalid(`journal option "${name}" must be a function`)
  }
  return {
    dir: opts.dir,
    fsync: opts.fsync,
    fsyncIntervalMs,
    segmentBytes,
    dedupWindowMs: opts.dedupWindowMs,
    maxAgeMs,
    maxBytes,
    keepNewerThanMs,
    maxSegments,
    tailCacheBytes,
    tailCacheRecords,
    now: opts.now ?? Date.now,
    onRepair: opts.onRepair ?? (() => undefined),
    onWarning: opts.onWarning ?? (() => undefined),
  }
}

function invalid(message: string): LogError {
  return new LogError('invalid_argument', message)
}
