import { isRevisionRace, writeOverRead, type KvBucket, type KvBucketLimits, type KvWatcher } from '../../storage/index.js'
import { compareCursors, type RentalCursor } from '../rental-events.js'

/**
 * Webhook delivery state on the key-value port (bucket `webhooks`), so a NATS KV bucket
 * can hold it for several delivery processes: the endpoint of each rental, how far its
 * deliveries got (`position`), the event being retried, the recent attempts, the dead
 * letters and the re-sends asked for.
 * Read-modify-writes go through `update` with the revision read, never a check and a
 * write in one turn of the loop.
 */

export interface WebhookEndpoint {
  readonly rental_id: string
  readonly url: string
  /** The first log seq this endpoint receives: the log's next seq when it was first set. */
  readonly start_seq: number
  readonly created_at: string
  readonly updated_at: string
  readonly state: 'enabled' | 'disabled'
  /** `gone`: the receiver answered 410. `failing`: no success for WEBHOOK_DISABLE_AFTER_S. */
  readonly disabled_reason: 'gone' | 'failing' | null
  readonly disabled_at: string | null
  readonly last_success_at: string | null
  /** The first failure since the last success; null while the endpoint succeeds. */
  readonly failing_since: string | null
  /**
   * Requests to end the wait of the event being retried (a retry request, a re-send, the
   * URL set again), counted: a retry state that saw fewer is tried at once, in whichever
   * process runs the rental's deliveries (it follows the endpoint through the watch).
   * Absent in records of earlier releases: 0.
   */
  readonly retry_requests?: number
  /**
   * How deliveries are signed: `v1a` (Ed25519 with the service's delivery keys, the
   * default) or `v1` (HMAC-SHA256 with the webhook's own secret). Absent: `v1a`.
   */
  readonly scheme?: WebhookScheme
  /** With scheme `v1`: which secret (webhook-secrets.ts) signs, so every process signs with the newest. */
  readonly secret_id?: string
}

export const WEBHOOK_SCHEMES = ['v1a', 'v1'] as const
export type WebhookScheme = (typeof WEBHOOK_SCHEMES)[number]

/** The event being delivered, kept so a restart resumes its retries (same webhook-id, same window). */
export interface PendingDelivery {
  readonly seq: number
  /** A dispute event's id (placed after record `seq`); absent for the record's own event. */
  readonly event_id?: string
  readonly first_attempt_at: number
  readonly attempts: number
  readonly next_at: number
  /** The endpoint's retry_requests when the wait began: a later request ends the wait. */
  readonly retries_seen?: number
}

/** A dispute event's place in the rental's order (rental-events.ts): after record `seq`, at `order` and `signal_seq`. */
export interface DisputeCursor {
  readonly seq: number
  readonly order: number
  readonly signal_seq: number
}

/** The value of `position.<rental_id>`: a log seq, and the last dispute event placed after it when one was delivered there. */
interface StoredPosition {
  readonly seq: number
  readonly order?: number
  readonly signal_seq?: number
}

const toCursor = (p: StoredPosition): RentalCursor => (p.order === undefined || p.signal_seq === undefined ? { seq: p.seq } : { seq: p.seq, dispute: { order: p.order, signalSeq: p.signal_seq } })

export interface DeliveryAttempt {
  readonly webhook_id: string
  readonly event_id: string
  readonly attempt: number
  readonly attempted_at: string
  /** `delivered`, or why it failed: `http_status`, `redirect`, `gone`, `timeout`, `refused_address`, `connection`. */
  readonly result: string
  /** The receiver's HTTP status, null when there was no answer. */
  readonly status: number | null
  readonly error: string | null
  readonly duration_ms: number
  /** When the next attempt is due, null if none follows. */
  readonly next_attempt_at: string | null
}

export interface DeadLetter {
  readonly webhook_id: string
  readonly event_id: string
  readonly seq: number
  readonly dead_at: string
  readonly attempts: number
  readonly last_error: string | null
}

export const WEBHOOK_STATE_LIMITS = {
  /** Attempts kept per rental, newest first (older ones are dropped). */
  attemptsPerRental: 100,
  /** Dead letters kept per rental, newest first. */
  deadLettersPerRental: 200,
  /** Event seqs waiting to be re-sent per rental. */
  resendsPerRental: 10_000,
} as const

/** The keys delivery keeps per rental, each `<kind>.<rental_id>`. */
const RENTAL_KEYS = ['endpoint', 'position', 'pending', 'attempts', 'dead', 'resend'] as const
/** An earlier release's key of the last dispute event delivered, now part of `position`. */
const LEGACY_DISPUTED = 'disputed'
/**
 * `tests.<rental_id>`: the times (ms) of the rental's test requests in the last
 * TEST_WINDOW_MS. Not removed with the endpoint: removing and setting the webhook again
 * must not hand out a fresh allowance.
 */
const TESTS = 'tests'
/** The span the test-request allowance counts over. */
export const TEST_WINDOW_MS = 60_000

export function webhookBucketLimits(maxRentals: number): KvBucketLimits {
  // Seven keys per rental at most; a re-send list of 10,000 seqs is about 120 KB.
  return { maxKeys: maxRentals * (RENTAL_KEYS.length + 1), maxValueBytes: 512 * 1024 }
}

const encode = (v: unknown) => Buffer.from(JSON.stringify(v))
const decode = <T>(bytes: Uint8Array): T => JSON.parse(Buffer.from(bytes).toString('utf8')) as T

export class WebhookState {
  readonly #bucket: KvBucket

  constructor(bucket: KvBucket) {
    this.#bucket = bucket
  }

  async #get<T>(key: string): Promise<{ value: T; revision: number } | null> {
    const entry = await this.#bucket.get(key)
    return entry === null ? null : { value: decode<T>(entry.value), revision: entry.revision }
  }

  /**
   * Applies `change` to the key's value with an expected revision, reading again after a
   * concurrent write. A change that hands back the value it was given writes nothing.
   */
  async #modify<T>(key: string, change: (current: T | null) => T | null): Promise<T | null> {
    for (;;) {
      const current = await this.#get<T>(key)
      const next = change(current?.value ?? null)
      if (next === (current?.value ?? null)) return next
      try {
        await writeOverRead(this.#bucket, key, current, next === null ? null : encode(next))
        return next
      } catch (err) {
        if (!isRevisionRace(err)) throw err
      }
    }
  }

  async endpoint(rentalId: string): Promise<WebhookEndpoint | null> {
    return (await this.#get<WebhookEndpoint>(`endpoint.${rentalId}`))?.value ?? null
  }

  modifyEndpoint(rentalId: string, change: (current: WebhookEndpoint | null) => WebhookEndpoint | null): Promise<WebhookEndpoint | null> {
    return this.#modify(`endpoint.${rentalId}`, change)
  }

  /** Removes the endpoint and everything delivery kept for it. */
  async removeEndpoint(rentalId: string): Promise<void> {
    for (const kind of [...RENTAL_KEYS, LEGACY_DISPUTED]) await this.#bucket.delete(`${kind}.${rentalId}`)
  }

  /** Every endpoint now, then each change: a process keeps its workers in step with every process's writes. */
  watchEndpoints(): KvWatcher {
    return this.#bucket.watch({ key: 'endpoint.>' })
  }

  /**
   * How far the rental's deliveries got: every event at or before this point of the
   * rental's order is delivered or dead-lettered (log records at or below `seq`, and the
   * dispute events placed after record `seq` up to `dispute`); null before the first write.
   */
  async position(rentalId: string): Promise<RentalCursor | null> {
    const stored = (await this.#get<StoredPosition>(`position.${rentalId}`))?.value
    return stored === undefined ? null : toCursor(stored)
  }

  /** Moves the position forward to `cursor` (never back: a write of an earlier point is a no-op). */
  async advancePosition(rentalId: string, cursor: RentalCursor): Promise<void> {
    const next: StoredPosition = cursor.dispute === undefined ? { seq: cursor.seq } : { seq: cursor.seq, order: cursor.dispute.order, signal_seq: cursor.dispute.signalSeq }
    await this.#modify<StoredPosition>(`position.${rentalId}`, (current) => (current !== null && compareCursors(toCursor(current), cursor) >= 0 ? current : next))
  }

  async pending(rentalId: string): Promise<PendingDelivery | null> {
    return (await this.#get<PendingDelivery>(`pending.${rentalId}`))?.value ?? null
  }

  async setPending(rentalId: string, pending: PendingDelivery | null): Promise<void> {
    if (pending === null) await this.#bucket.delete(`pending.${rentalId}`)
    else await this.#bucket.put(`pending.${rentalId}`, encode(pending))
  }

  /**
   * The dispute cursor an earlier release kept in a key of its own (`disputed.<rental_id>`,
   * the last dispute event delivered): read when a loop starts, folded into the position
   * and deleted.
   */
  async legacyDisputeCursor(rentalId: string): Promise<RentalCursor | null> {
    const stored = (await this.#get<DisputeCursor>(`${LEGACY_DISPUTED}.${rentalId}`))?.value
    return stored === undefined ? null : { seq: stored.seq, dispute: { order: stored.order, signalSeq: stored.signal_seq } }
  }

  async deleteLegacyDisputeCursor(rentalId: string): Promise<void> {
    await this.#bucket.delete(`${LEGACY_DISPUTED}.${rentalId}`)
  }

  async addAttempt(rentalId: string, attempt: DeliveryAttempt): Promise<void> {
    await this.addAttempts(rentalId, [attempt])
  }

  /** Adds attempts made in this order (oldest first) with one write; the list keeps the newest. */
  async addAttempts(rentalId: string, attempts: readonly DeliveryAttempt[]): Promise<void> {
    if (attempts.length === 0) return
    const newest = attempts.slice(-WEBHOOK_STATE_LIMITS.attemptsPerRental).reverse()
    await this.#modify<DeliveryAttempt[]>(`attempts.${rentalId}`, (list) => [...newest, ...(list ?? [])].slice(0, WEBHOOK_STATE_LIMITS.attemptsPerRental))
  }

  async attempts(rentalId: string): Promise<DeliveryAttempt[]> {
    return (await this.#get<DeliveryAttempt[]>(`attempts.${rentalId}`))?.value ?? []
  }

  async addDeadLetter(rentalId: string, letter: DeadLetter): Promise<void> {
    await this.#modify<DeadLetter[]>(`dead.${rentalId}`, (list) => [letter, ...(list ?? []).filter((l) => l.event_id !== letter.event_id)].slice(0, WEBHOOK_STATE_LIMITS.deadLettersPerRental))
  }

  async deadLetters(rentalId: string): Promise<DeadLetter[]> {
    return (await this.#get<DeadLetter[]>(`dead.${rentalId}`))?.value ?? []
  }

  /** Queues seqs to be sent again; false when the queue would pass its bound. */
  async requestResend(rentalId: string, seqs: readonly number[]): Promise<boolean> {
    let fits = true
    await this.#modify<number[]>(`resend.${rentalId}`, (list) => {
      const merged = [...new Set([...(list ?? []), ...seqs])].sort((a, b) => a - b)
      fits = merged.length <= WEBHOOK_STATE_LIMITS.resendsPerRental
      return fits ? merged : list
    })
    return fits
  }

  /**
   * Takes a place for one test request of the rental: at most `perWindow` in any
   * TEST_WINDOW_MS. Resolves with 0 when taken, else with the milliseconds until the
   * oldest place in the window frees. The times are kept on the bucket and written with
   * an expected revision, so processes sharing it count one allowance exactly: of
   * concurrent takes for the last place one wins, the others read again and are refused.
   * A refusal writes nothing, so a flood of refused requests costs reads only.
   */
  async takeTestPlace(rentalId: string, perWindow: number, now: number): Promise<number> {
    let waitMs = 0
    await this.#modify<number[]>(`${TESTS}.${rentalId}`, (times) => {
      // Sorted, since processes' clocks differ a little; a time ahead of this clock still counts.
      const recent = (times ?? []).filter((at) => at > now - TEST_WINDOW_MS).sort((a, b) => a - b)
      if (recent.length < perWindow) {
        waitMs = 0
        return [...recent, now]
      }
      // A place frees once all but perWindow - 1 of the recent times have left the window.
      waitMs = Math.max(1, recent[recent.length - perWindow]! + TEST_WINDOW_MS - now)
      return times
    })
    return waitMs
  }

  /** Deletes the rental's test-request times once none is inside the window any more (none is taken back early). */
  async forgetTestPlaces(rentalId: string, now: number): Promise<void> {
    await this.#modify<number[]>(`${TESTS}.${rentalId}`, (times) => (times !== null && times.every((at) => at <= now - TEST_WINDOW_MS) ? null : times))
  }

  /** The oldest seq waiting to be re-sent, if any. */
  async nextResend(rentalId: string): Promise<number | undefined> {
    return (await this.#get<number[]>(`resend.${rentalId}`))?.value[0]
  }

  async resent(rentalId: string, seq: number): Promise<void> {
    await this.#modify<number[]>(`resend.${rentalId}`, (list) => {
      const rest = (list ?? []).filter((s) => s !== seq)
      return rest.length === 0 ? null : rest
    })
  }
}
