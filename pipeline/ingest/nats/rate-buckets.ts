import { isKvError, isRevisionRace, writeOverRead, type KvBucket, type KvBucketLimits } from '../../../storage/index.js'
import type { Manifest } from '../../../schemas/index.js'
import { LogError } from '../../log-error.js'
import type { RateBuckets } from '../ports.js'
import { refundToken, takeToken, type RateDecision, type TokenBucket } from '../token-bucket.js'
import { subjectToken } from './subject-token.js'

export interface KvRateBucketsOptions {
  readonly flagAfterMinutes: number
  /** A refund that could not be written: the token is lost, the source admits one fewer for a moment. */
  readonly onWarning: (message: string, err: unknown) => void
}

type Step =
  | { readonly kind: 'take'; readonly maxRate: Manifest['max_rate']; readonly now: number; readonly resolve: (d: RateDecision) => void; readonly reject: (err: unknown) => void }
  | { readonly kind: 'refund'; readonly maxRate: Manifest['max_rate']; readonly resolve: () => void }

interface SourceQueue {
  readonly key: string
  steps: Step[]
  writing: boolean
  /** The bucket as this gateway last wrote or read it; undefined: read it first; null: it has no entry. */
  known: { readonly bucket: TokenBucket; readonly revision: number } | null | undefined
}

/** Write attempts one batch makes against other gateways' writes before it answers 503. */
const MAX_ATTEMPTS = 64

/**
 * Every source's token bucket in one key of a shared bucket (NATS KV), so that the
 * gateways of a cluster admit together what one gateway would: the bucket is read and
 * written under its revision, and a write another gateway made first sends this one
 * back to read it again. Never more than `burst + rate × t` signals of a source in any
 * span t, however a balancer spreads its pushes.
 *
 * Per source, one write is in flight from this gateway at a time: the takes that arrive
 * meanwhile are decided together, in their order, by the next write (one round trip for
 * a burst, not one each). A write whose fate is unknown (NATS unreachable) refuses its
 * takes with a transient error (503, retry), and the bucket is read again.
 */
export class KvRateBuckets implements RateBuckets {
  readonly #bucket: KvBucket
  readonly #o: KvRateBucketsOptions
  /** One per source that pushed through this gateway: bounded by the registry's sources. */
  readonly #queues = new Map<string, SourceQueue>()

  constructor(bucket: KvBucket, options: KvRateBucketsOptions) {
    this.#bucket = bucket
    this.#o = options
  }

  /** One key per source, and each value a few dozen bytes. */
  static bucketLimits(maxSources: number): KvBucketLimits {
    return { maxKeys: maxSources, maxValueBytes: 256 }
  }

  take(sourceId: string, maxRate: Manifest['max_rate'], now: number): Promise<RateDecision> {
    return new Promise((resolve, reject) => this.#enqueue(sourceId, { kind: 'take', maxRate, now, resolve, reject }))
  }

  refund(sourceId: string, maxRate: Manifest['max_rate']): Promise<void> {
    return new Promise((resolve) => this.#enqueue(sourceId, { kind: 'refund', maxRate, resolve }))
  }

  #enqueue(sourceId: string, step: Step): void {
    let queue = this.#queues.get(sourceId)
    if (queue === undefined) {
      queue = { key: `rate.${subjectToken(sourceId)}`, steps: [], writing: false, known: undefined }
      this.#queues.set(sourceId, queue)
    }
    queue.steps.push(step)
    if (!queue.writing) void this.#drain(queue)
  }

  async #drain(queue: SourceQueue): Promise<void> {
    queue.writing = true
    while (queue.steps.length > 0) {
      const batch = queue.steps
      queue.steps = []
      try {
        const decisions = await this.#write(queue, batch)
        batch.forEach((step, i) => {
          if (step.kind === 'take') step.resolve(decisions[i]!)
          else step.resolve()
        })
      } catch (err) {
        const refused = rateError(err)
        let refundsLost = 0
        for (const step of batch) {
          if (step.kind === 'take') step.reject(refused)
          else {
            refundsLost++
            step.resolve()
          }
        }
        if (refundsLost > 0) this.#o.onWarning(`${refundsLost} rate token refund(s) not written`, err)
      }
    }
    queue.writing = false
  }

  /** Decides `batch` in order against the stored bucket and writes the result under its revision. */
  async #write(queue: SourceQueue, batch: readonly Step[]): Promise<RateDecision[]> {
    for (let attempt = 1; ; attempt++) {
      if (queue.known === undefined) {
        const entry = await this.#bucket.get(queue.key)
        queue.known = entry === null ? null : { bucket: decode(entry.value), revision: entry.revision }
      }
      const decisions: RateDecision[] = []
      let bucket = queue.known?.bucket
      for (const step of batch) {
        if (step.kind === 'refund') {
          bucket = refundToken(bucket, step.maxRate)
          decisions.push({ ok: true })
          continue
        }
        const taken = takeToken(bucket, step.maxRate, step.now, this.#o.flagAfterMinutes)
        bucket = taken.bucket
        decisions.push(taken.decision)
      }
      if (bucket === undefined) return decisions // refunds alone to a source never seen: nothing to write
      const value = encode(bucket)
      try {
        const revision = await writeOverRead(this.#bucket, queue.key, queue.known, value)
        queue.known = { bucket, revision }
        return decisions
      } catch (err) {
        // Read again: another gateway wrote first (retry with its bucket), or the write's fate is unknown.
        queue.known = undefined
        if (!isRevisionRace(err) || attempt >= MAX_ATTEMPTS) throw err
      }
    }
  }
}

function encode(bucket: TokenBucket): Uint8Array {
  // -Infinity (never refused) is not JSON: stored as null.
  return Buffer.from(JSON.stringify([bucket.tokens, bucket.updatedAt, bucket.overRateSince, Number.isFinite(bucket.lastRefusedAt) ? bucket.lastRefusedAt : null]))
}

function decode(value: Uint8Array): TokenBucket {
  const parsed: unknown = JSON.parse(Buffer.from(value).toString('utf8'))
  if (!Array.isArray(parsed) || parsed.length !== 4 || !parsed.slice(0, 3).every((n) => typeof n === 'number') || !(parsed[3] === null || typeof parsed[3] === 'number')) {
    throw new LogError('log_corrupt', 'a rate bucket entry is not [tokens, updatedAt, overRateSince, lastRefusedAt]')
  }
  const [tokens, updatedAt, overRateSince, lastRefusedAt] = parsed as [number, number, number, number | null]
  return { tokens, updatedAt, overRateSince, lastRefusedAt: lastRefusedAt ?? Number.NEGATIVE_INFINITY }
}

/** The pipeline answers a transient LogError with 503 and Retry-After. */
function rateError(err: unknown): unknown {
  if (err instanceof LogError) return err
  if (isKvError(err) && (err.transient || err.code === 'closed' || err.code === 'wrong_revision' || err.code === 'exists')) {
    return new LogError('unavailable', 'the shared rate buckets could not be written for now; retry', { cause: err })
  }
  return new LogError('log_io', 'the shared rate buckets failed', { cause: err })
}
