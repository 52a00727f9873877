import { isKvError, isRevisionRace, writeOverRead, type KvBucket, type KvBucketLimits } from '../../storage/index.js'
import type { UsageCaller, UsageMeter, UsageMonth } from './usage-meter.js'

/** Caller-months the bucket holds; a new one past it is not written (and logged). */
export const USAGE_MAX_KEYS = 200_000
/** How often counts in memory are written. */
export const USAGE_FLUSH_MS = 1000
/** Writes of one key per flush before its count waits for the next flush. */
const WRITE_ATTEMPTS = 8

interface Stored {
  role: string
  subject: string
  month: string
  /** Day of the month ('01'..'31') → rows. */
  days: Record<string, number>
}

interface Pending {
  caller: UsageCaller
  month: string
  days: Map<string, number>
}

const monthOf = (ms: number) => new Date(ms).toISOString().slice(0, 7)
const dayOf = (ms: number) => new Date(ms).toISOString().slice(8, 10)

/**
 * The usage meter on a KV bucket: one key per caller and month,
 * `export.<role>.<subject as base64url>.<YYYYMM>`, holding the rows of each day. Writes use
 * create-if-absent and an expected revision, so processes counting for the same caller
 * at once each add their own rows and none is lost. What is counted in memory and not yet
 * written (up to USAGE_FLUSH_MS of it) is lost if the process is killed.
 */
export class KvUsageMeter implements UsageMeter {
  readonly #bucket: KvBucket
  readonly #now: () => number
  readonly #onWarning: (message: string, err?: unknown) => void
  #pending = new Map<string, Pending>()
  #flushing: Promise<void> = Promise.resolve()
  readonly #timer: NodeJS.Timeout
  #closed = false

  static readonly bucketLimits: KvBucketLimits = { maxKeys: USAGE_MAX_KEYS, maxValueBytes: 4096 }

  constructor(bucket: KvBucket, options: { now?: () => number; onWarning?: (message: string, err?: unknown) => void } = {}) {
    this.#bucket = bucket
    this.#now = options.now ?? Date.now
    this.#onWarning = options.onWarning ?? (() => {})
    this.#timer = setInterval(() => void this.flush(), USAGE_FLUSH_MS).unref()
  }

  static keyOf(caller: UsageCaller, month: string): string {
    return `export.${caller.role}.${Buffer.from(caller.subject).toString('base64url')}.${month.replace('-', '')}`
  }

  add(caller: UsageCaller, rows: number, at = this.#now()): void {
    if (rows <= 0) return
    const month = monthOf(at)
    const key = KvUsageMeter.keyOf(caller, month)
    let pending = this.#pending.get(key)
    if (pending === undefined) {
      pending = { caller: { role: caller.role, subject: caller.subject }, month, days: new Map() }
      this.#pending.set(key, pending)
    }
    const day = dayOf(at)
    pending.days.set(day, (pending.days.get(day) ?? 0) + rows)
  }

  async read(caller: UsageCaller, month: string): Promise<UsageMonth> {
    const key = KvUsageMeter.keyOf(caller, month)
    const entry = await this.#bucket.get(key)
    const days = new Map(Object.entries(entry === null ? {} : decode(entry.value).days))
    for (const [day, rows] of this.#pending.get(key)?.days ?? []) days.set(day, (days.get(day) ?? 0) + rows)
    const list = [...days].sort(([a], [b]) => a.localeCompare(b)).map(([day, rows]) => ({ day: `${month}-${day}`, rows_exported: rows }))
    return { role: caller.role, subject: caller.subject, month, rows_exported: list.reduce((sum, d) => sum + d.rows_exported, 0), days: list }
  }

  flush(): Promise<void> {
    // One flush at a time: a second waits for the first, then writes what came since.
    this.#flushing = this.#flushing.then(() => this.#flushOnce())
    return this.#flushing
  }

  async #flushOnce(): Promise<void> {
    const batch = this.#pending
    if (batch.size === 0) return
    this.#pending = new Map()
    for (const [key, pending] of batch) {
      try {
        await this.#write(key, pending)
      } catch (err) {
        if (isKvError(err, 'bucket_full') || isKvError(err, 'closed')) {
          this.#onWarning(`usage: ${pending.caller.role} ${pending.caller.subject} ${pending.month} not written`, err)
          continue
        }
        // Kept for the next flush: a count is never dropped for a passing failure.
        for (const [day, rows] of pending.days) this.#merge(key, pending, day, rows)
        this.#onWarning('usage: write failed; retrying at the next flush', err)
      }
    }
  }

  #merge(key: string, from: Pending, day: string, rows: number): void {
    let into = this.#pending.get(key)
    if (into === undefined) {
      into = { caller: from.caller, month: from.month, days: new Map() }
      this.#pending.set(key, into)
    }
    into.days.set(day, (into.days.get(day) ?? 0) + rows)
  }

  async #write(key: string, pending: Pending): Promise<void> {
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const entry = await this.#bucket.get(key)
      const stored: Stored = entry === null ? { role: pending.caller.role, subject: pending.caller.subject, month: pending.month, days: {} } : decode(entry.value)
      for (const [day, rows] of pending.days) stored.days[day] = (stored.days[day] ?? 0) + rows
      const value = Buffer.from(JSON.stringify(stored))
      try {
        await writeOverRead(this.#bucket, key, entry, value)
        return
      } catch (err) {
        // Another process wrote in between: read its count and add ours again.
        if (!isRevisionRace(err)) throw err
      }
    }
    throw new Error(`usage: ${key} kept changing under ${WRITE_ATTEMPTS} writes`)
  }

  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#timer)
    await this.flush()
  }
}

function decode(value: Uint8Array): Stored {
  const doc = JSON.parse(Buffer.from(value).toString('utf8')) as Stored
  return { role: doc.role, subject: doc.subject, month: doc.month, days: { ...doc.days } }
}
