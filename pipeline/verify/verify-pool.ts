import { existsSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { fileURLToPath } from 'node:url'
import { Piscina } from 'piscina'
import { SharedRoom } from '../shared-room.js'
import { packBatch, type VerifyItem } from './verify-batch.js'

export interface VerifyPoolOptions {
  /** Worker threads; 0 means one per core but one. */
  readonly threads: number
  /** Most signatures sent to a worker in one message. */
  readonly batchSize: number
  /** Most slots taken (requests waiting for or in verification); past it the edge sheds with 503. */
  readonly queueLimit: number
  /**
   * Longest the oldest queued request may have waited for a worker before new ones are
   * shed. A count alone lets a slowed-down gateway (a refusal storm eating the CPU)
   * queue for hundreds of milliseconds; this keeps admitted requests fast instead.
   */
  readonly maxWaitMs: number
  /**
   * A worker failed outside any batch (a batch's own failure rejects its requests).
   * `lost`: no worker is left and none will be started (piscina gives up on workers that
   * fail while starting), so nothing queued will ever be verified.
   */
  readonly onError: (err: unknown, lost: boolean) => void
}

interface Waiter {
  readonly item: VerifyItem
  readonly holder: string
  readonly queuedAt: number
  readonly resolve: (valid: boolean) => void
  readonly reject: (err: unknown) => void
}

/**
 * Batches handed to one worker at a time. With one, a worker that finishes a batch
 * sits idle until the event loop has taken the results and sent the next batch; with
 * two, the next batch is already in its message queue.
 */
const BATCHES_PER_WORKER = 2
/** Young generation of a verify worker's heap, in MB. */
const VERIFY_WORKER_YOUNG_GENERATION_MB = 4

/** Thrown by `verify` once the pool is closing: the caller answers 503, not 500. */
export class PoolClosedError extends Error {
  readonly code = 'pool_closed'
  constructor() {
    super('verify pool is closed')
    this.name = 'PoolClosedError'
  }
}

export const isPoolClosed = (err: unknown): err is PoolClosedError => err instanceof PoolClosedError

/** The worker module sits beside this file: `.js` once built, `.ts` under the test loader. */
function workerFile(): string {
  const js = fileURLToPath(new URL('./verify-worker.js', import.meta.url))
  return existsSync(js) ? js : fileURLToPath(new URL('./verify-worker.ts', import.meta.url))
}

/**
 * Ed25519 verification off the event loop. Requests are gathered into batches: a
 * batch leaves as soon as a worker is idle (so a lone request is not delayed) and
 * otherwise grows up to `batchSize` while the workers are busy, which is when
 * amortising the thread hop pays. Each worker also holds one batch in reserve
 * (BATCHES_PER_WORKER), which it starts without waiting for the event loop.
 *
 * The number of requests waiting is bounded by `queueLimit`: the edge takes a slot
 * with `reserve()` once a request's body is complete and its cheap checks passed, and
 * spends it on `verify()` (or gives it back with `release()`). A holder (a source, or
 * one lane of it: the edge decides) holds at most a quarter of the slots (#slots), so
 * requests sent under one source's ids cannot shut the others out. Bodies still arriving hold no slot; they are bounded by the body
 * reader (BODY_SLOW_MAX).
 */
export class VerifyPool {
  readonly #piscina: Piscina
  readonly #threads: number
  readonly #batchSize: number
  readonly #queueLimit: number
  readonly #maxWaitMs: number
  #waiting: Waiter[] = []
  #batchesInFlight = 0
  /**
   * Slots taken, per holder. A holder holds at most a quarter of them, and the last
   * eighth only while it holds little (SharedRoom): source and key ids travel in clear,
   * so anyone can send requests under them whose signatures fail, each costing a
   * verification, and without a share a flood of them took every other source's slots.
   */
  readonly #slots: SharedRoom<string>
  #flushScheduled = false
  #closed = false

  constructor(options: VerifyPoolOptions) {
    // The event loop needs a core of its own: on two cores one worker accepted about 12 %
    // more signals per second at peak than two (docs/benchmarks.md), which only fought the
    // main thread for the cores.
    this.#threads = options.threads > 0 ? options.threads : Math.max(1, availableParallelism() - 1)
    this.#batchSize = options.batchSize
    this.#queueLimit = options.queueLimit
    this.#slots = new SharedRoom({ max: options.queueLimit })
    this.#maxWaitMs = options.maxWaitMs
    this.#piscina = new Piscina({
      filename: workerFile(),
      minThreads: this.#threads,
      maxThreads: this.#threads,
      concurrentTasksPerWorker: BATCHES_PER_WORKER,
      // Batches are dispatched only when a worker has room, so piscina's own queue stays short.
      maxQueue: this.#threads * 4,
      idleTimeout: Number.POSITIVE_INFINITY,
      // The process's V8 flags size every isolate's young generation alike
      // (config/node-flags.ts), but a verify worker allocates only its batches' small
      // result arrays: capping it keeps the main thread's larger young generation from
      // being repeated, as resident memory, in every worker.
      resourceLimits: { maxYoungGenerationSizeMb: VERIFY_WORKER_YOUNG_GENERATION_MB },
    })
    // Without a listener, piscina's 'error' event would throw and end the process.
    this.#piscina.on('error', (err: unknown) => options.onError(err, this.#piscina.threads.length === 0))
  }

  get threads(): number {
    return this.#threads
  }

  /** Slots taken: requests waiting for or in verification. */
  get pending(): number {
    return this.#slots.total
  }

  /**
   * Whether a slot is free now for `holder`, or for anyone when it is not
   * named: a cheap look before any parsing.
   */
  hasRoom(holder?: string): boolean {
    if (this.#closed) return false
    if (holder === undefined ? this.#slots.total >= this.#queueLimit : this.#slots.room(holder, 1) !== 'ok') return false
    const oldest = this.#waiting[0]
    return oldest === undefined || performance.now() - oldest.queuedAt <= this.#maxWaitMs
  }

  /** Takes a slot for `holder` if one is free for it; false means shed. */
  reserve(holder: string): boolean {
    if (!this.hasRoom(holder)) return false
    this.#slots.added(holder)
    return true
  }

  /** Gives back a slot of `holder` that will not be spent on `verify`. */
  release(holder: string): void {
    this.#slots.removed(holder)
  }

  /** Verifies one signature, spending a slot `holder` took with `reserve()`. */
  verify(item: VerifyItem, holder: string): Promise<boolean> {
    if (this.#closed) {
      this.release(holder)
      return Promise.reject(new PoolClosedError())
    }
    // The batch packs fixed-width fields: a key or signature of another length would be
    // cut or padded there, so it is refused here, as verifyEd25519 refuses it.
    if (item.publicKey.length !== 32 || item.signature.length !== 64) {
      this.release(holder)
      return Promise.resolve(false)
    }
    return new Promise<boolean>((resolve, reject) => {
      this.#waiting.push({ item, holder, queuedAt: performance.now(), resolve, reject })
      if (this.#waiting.length >= this.#batchSize) this.#dispatch()
      else if (!this.#flushScheduled) {
        this.#flushScheduled = true
        setImmediate(() => {
          this.#flushScheduled = false
          this.#dispatch()
        })
      }
    })
  }

  /**
   * Sends batches while workers have room. What waits is split evenly across the idle
   * workers (a short queue all sent to one worker would leave the others idle); once
   * none is idle, what waits goes whole, up to `batchSize`, as a worker's reserve batch.
   * Leftovers wait for the next completion. A reserve batch waits inside its worker,
   * out of sight of `maxWaitMs`, for at most one batch's verification (about 2.5 ms at
   * 64 signatures).
   */
  #dispatch(): void {
    while (this.#waiting.length > 0 && this.#batchesInFlight < this.#threads * BATCHES_PER_WORKER) {
      const idle = this.#threads - this.#batchesInFlight
      const share = idle > 0 ? Math.ceil(this.#waiting.length / idle) : this.#waiting.length
      this.#run(this.#waiting.splice(0, Math.min(this.#batchSize, share)))
    }
  }

  #run(waiters: Waiter[]): void {
    this.#batchesInFlight++
    const batch = packBatch(waiters.map((w) => w.item))
    this.#piscina
      .run(batch, { transferList: [batch.keys, batch.signatures, batch.messages, batch.messageEnds.buffer as ArrayBuffer] })
      .then(
        (results: Uint8Array) => waiters.forEach((w, i) => w.resolve(results[i] === 1)),
        (err: unknown) => waiters.forEach((w) => w.reject(err)),
      )
      .finally(() => {
        this.#batchesInFlight--
        for (const w of waiters) this.#slots.removed(w.holder)
        this.#dispatch()
      })
  }

  /** Finishes what is queued, then stops the workers. Safe to call twice. */
  async close(): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    while (this.#waiting.length > 0 || this.#batchesInFlight > 0) {
      this.#dispatch()
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    await this.#piscina.destroy()
  }
}
