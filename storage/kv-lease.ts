import { KvError } from './kv-store.js'
import type { KvBucket, KvWatcher } from './kv-store.js'
import { LeaseKey, leaseTiming } from './lease-key.js'
import type { LeaseTiming } from './lease-key.js'

/**
 * One key of the key-value port held by one holder at a time: the lease of a single
 * resource (a durable consumer of the log) that one process in the cluster may use. The
 * rules of taking, renewing and lapsing are those of `LeaseKey` (`./lease-key.ts`); this
 * adds the loop around them:
 *
 * - `acquire('refuse')` takes a free or lapsed key, and answers with the holder when
 *   another holder shows it is alive by renewing (or by winning the race for a free key).
 *   A holder that died is not refused for ever: its key is taken once it lapses, the lease
 *   time after this process first saw it. A live holder is named within one renewal
 *   period (a third of the lease time).
 * - `acquire('wait')` waits as a standby until the key is free or lapses, then takes it.
 *   A release is seen on the watch and taken over at once.
 * - Once held, the lease is renewed every third of the lease time. It is lost when a
 *   renewal is refused for its revision, when the watch shows another holder's write, or
 *   when no renewal succeeded for two thirds of the lease time on this clock (the holder
 *   then stops before anyone can see the lease lapse). A loss is final: `onLost` is called
 *   once and the holder must stop using the resource at once; `holds()` turns false at
 *   the moment of the loss even if a timer runs late.
 * - `release()` stops renewing and deletes the key at this holder's revision, so a
 *   standby takes over at once. Safe to call twice; it also ends an `acquire` under way.
 */

export type LeaseMode = 'refuse' | 'wait'

export type LeaseAcquired = { readonly held: true } | { readonly held: false; readonly holder: string }

export interface LeaseLoss {
  /** `taken`: another holder wrote the key. `expired`: no renewal succeeded in time. */
  readonly reason: 'taken' | 'expired'
  /** The holder seen on the key when the loss was noticed, if another one. */
  readonly holder: string | null
}

export interface KvLeaseOptions {
  readonly bucket: KvBucket
  readonly key: string
  readonly holderId: string
  /** How long the lease lasts without a renewal, as a taker judges it on its own clock. */
  readonly leaseMs: number
  /** Called once when a held lease is lost. */
  readonly onLost?: (loss: LeaseLoss) => void
  /** Failures of renewals and of the watch, which the lease survives until its validity runs out. */
  readonly onError?: (err: unknown) => void
  /** A monotonic clock in ms (performance.now by default). */
  readonly now?: () => number
}

type State = 'idle' | 'acquiring' | 'held' | 'lost' | 'closed'

export class KvLease {
  readonly holderId: string
  readonly #o: KvLeaseOptions
  readonly #now: () => number
  readonly #timing: LeaseTiming
  readonly #key: LeaseKey
  #state: State = 'idle'
  #watch: KvWatcher | undefined
  #watching: Promise<void> | undefined
  #wake: (() => void) | undefined
  #renewTimer: NodeJS.Timeout | undefined
  #fenceTimer: NodeJS.Timeout | undefined
  #renewing: Promise<void> | undefined

  constructor(options: KvLeaseOptions) {
    this.#o = options
    this.holderId = options.holderId
    this.#now = options.now ?? (() => performance.now())
    this.#timing = leaseTiming(options.leaseMs)
    this.#key = new LeaseKey({ bucket: options.bucket, key: options.key, holderId: options.holderId, timing: this.#timing, now: this.#now })
  }

  /** Whether the holder may use the resource now. */
  holds(): boolean {
    return this.#state === 'held' && this.#key.holds()
  }

  /** How long the holder may go on counting on its lease unless a renewal succeeds first (0 when not held). */
  validForMs(): number {
    const until = this.#state === 'held' ? this.#key.validUntil() : undefined
    return until === undefined ? 0 : Math.max(0, until - this.#now())
  }

  /** Takes the lease (see the file comment for the two modes). Called once; KvError `closed` if released meanwhile. */
  async acquire(mode: LeaseMode): Promise<LeaseAcquired> {
    if (this.#state !== 'idle') throw new KvError('invalid_argument', 'a lease is acquired once')
    this.#state = 'acquiring'
    this.#follow()
    await this.#watch!.initialized
    const first = this.#key.seen()?.revision
    for (;;) {
      if (this.#state !== 'acquiring') throw new KvError('closed', `the lease on ${this.#o.key} was released while being acquired`)
      const live = this.#key.liveHolder()
      if (live === null) {
        let taken = false
        try {
          taken = await this.#key.take()
        } catch (err) {
          this.#o.onError?.(err)
        }
        if (taken && this.#state === 'acquiring') {
          this.#state = 'held'
          this.#scheduleRenewal()
          this.#armFence()
          return { held: true }
        }
        if (taken) {
          const revision = this.#key.drop()
          if (revision !== undefined) await this.#key.free(revision).catch((err: unknown) => this.#o.onError?.(err))
          continue
        }
        // Another holder won the race (or the write failed): the watch shows what happened.
        await this.#next(this.#timing.renewMs)
        continue
      }
      if (mode === 'refuse' && live.revision !== first) {
        await this.release()
        return { held: false, holder: live.holder! }
      }
      await this.#next(this.#key.lapsesAt() - this.#now() + 1)
    }
  }

  /** Stops renewing and frees the key for another holder. Safe to call twice. */
  async release(): Promise<void> {
    if (this.#state === 'closed') return
    const was = this.#state
    this.#state = 'closed'
    this.#stopTimers()
    this.#wake?.()
    this.#watch?.stop()
    await this.#renewing
    await this.#watching
    const revision = this.#key.drop()
    if (was === 'held' && revision !== undefined) await this.#key.free(revision).catch((err: unknown) => this.#o.onError?.(err))
  }

  /** Resolves at the next change of the key, after `ms`, or on release. */
  #next(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer)
        if (this.#wake === done) this.#wake = undefined
        resolve()
      }
      const timer = setTimeout(done, Math.max(0, ms))
      this.#wake = done
    })
  }

  #follow(): void {
    const watch = this.#o.bucket.watch({ key: this.#o.key })
    this.#watch = watch
    this.#watching = (async () => {
      for await (const entry of watch) {
        if (this.#key.observe(entry)) this.#lose('taken')
        this.#wake?.()
      }
    })().catch((err: unknown) => {
      this.#o.onError?.(err)
      // Fell behind or the storage failed: follow again from the current value. Renewals
      // and the fence keep the lease safe meanwhile.
      if (this.#state === 'acquiring' || this.#state === 'held') setTimeout(() => (this.#state === 'acquiring' || this.#state === 'held') && this.#follow(), this.#timing.renewMs).unref()
    })
  }

  #scheduleRenewal(): void {
    this.#renewTimer = setTimeout(() => {
      this.#renewing = this.#renew().finally(() => {
        this.#renewing = undefined
        if (this.#state === 'held') this.#scheduleRenewal()
      })
    }, this.#timing.renewMs)
    this.#renewTimer.unref()
  }

  async #renew(): Promise<void> {
    try {
      const result = await this.#key.renew()
      if (result === 'lost') this.#lose('taken')
      else if (result === 'renewed') this.#armFence()
    } catch (err) {
      // Kept until its validity runs out: the fence stops the holder then.
      this.#o.onError?.(err)
    }
  }

  #armFence(): void {
    clearTimeout(this.#fenceTimer)
    const until = this.#key.validUntil()
    if (this.#state !== 'held' || until === undefined) return
    this.#fenceTimer = setTimeout(() => {
      if (this.#key.fence()) this.#lose('expired')
      else this.#armFence()
    }, Math.max(0, until - this.#now()) + 1)
    this.#fenceTimer.unref()
  }

  #lose(reason: LeaseLoss['reason']): void {
    if (this.#state !== 'held') return
    this.#state = 'lost'
    this.#stopTimers()
    this.#key.drop()
    this.#watch?.stop()
    const seen = this.#key.seen()?.holder ?? null
    this.#o.onLost?.({ reason, holder: seen === this.holderId ? null : seen })
  }

  #stopTimers(): void {
    clearTimeout(this.#renewTimer)
    clearTimeout(this.#fenceTimer)
  }
}
