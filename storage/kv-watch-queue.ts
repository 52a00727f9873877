import { KV_LIMITS, KvError, keyMatches, type KvEntry, type KvWatcher, type KvWatchEntry } from './kv-store.js'

/**
 * One watch of a bucket: the changes the bucket hands it, queued for a consumer that
 * takes them at its own pace, bounded (KV_LIMITS.watchBacklog beyond the current values
 * it started with) so a stalled consumer cannot grow memory. The file adapter hands it
 * the current values at construction; the NATS adapter, whose current values arrive
 * from the server one by one, constructs it with `currentToCome` and hands them with
 * `offerCurrent`, then calls `currentDone`.
 */
export class KvWatchQueue implements KvWatcher {
  readonly initialized: Promise<void>
  readonly #filter: string | undefined
  readonly #onStop: (queue: KvWatchQueue) => void
  #limit: number
  #items: KvWatchEntry[]
  #head = 0
  /** Current values the watch started with, not yet handed out. */
  #initialLeft: number
  #markInitialized: () => void = () => undefined
  /** More current values are to come through `offerCurrent`. */
  #currentOpen: boolean
  /** Current values handed out so far (so an empty start resolves `initialized` at once). */
  #currentTaken = 0
  #waiter: { resolve: (r: IteratorResult<KvWatchEntry>) => void; reject: (err: unknown) => void } | undefined
  #done = false
  #failure: KvError | undefined

  constructor(
    filter: string | undefined,
    initial: KvEntry[],
    onStop: (queue: KvWatchQueue) => void,
    options: { readonly currentToCome?: boolean; readonly backlog?: number } = {},
  ) {
    this.#filter = filter
    this.#onStop = onStop
    this.#items = initial.map((e) => ({ ...e, isUpdate: false }))
    this.#initialLeft = this.#items.length
    this.#currentOpen = options.currentToCome === true
    this.#limit = this.#items.length + (options.backlog ?? KV_LIMITS.watchBacklog)
    this.initialized = new Promise((resolve) => (this.#markInitialized = resolve))
    if (this.#initialLeft === 0 && !this.#currentOpen) this.#markInitialized()
  }

  /**
   * A current value the watch starts with (before any change); only while
   * `currentToCome`. A deletion is skipped: a key deleted before the start has no value.
   */
  offerCurrent(entry: KvEntry): void {
    if (this.#done || !this.#currentOpen || entry.operation === 'DEL' || !keyMatches(this.#filter, entry.key)) return
    const item: KvWatchEntry = { ...entry, isUpdate: false }
    this.#currentTaken++
    if (this.#waiter !== undefined) {
      const { resolve } = this.#waiter
      this.#waiter = undefined
      resolve({ value: item, done: false })
      return
    }
    // Current values do not count against the backlog: they are bounded by the bucket.
    this.#limit++
    this.#initialLeft++
    this.#items.push(item)
  }

  /**
   * Every current value was offered. `initialized` resolves now if none is left to take
   * and the consumer is waiting for more (or was handed none), else at its next ask.
   */
  currentDone(): void {
    if (!this.#currentOpen) return
    this.#currentOpen = false
    if (this.#initialLeft === 0 && (this.#waiter !== undefined || this.#currentTaken === 0)) this.#markInitialized()
  }

  /** Ends the iteration with `err` once the consumer asks for the next change. */
  fail(err: KvError): void {
    if (this.#done) return
    this.#fail(err)
  }

  /** Called by the bucket with every change, in revision order. */
  offer(entry: KvEntry): void {
    if (this.#done || !keyMatches(this.#filter, entry.key)) return
    const item: KvWatchEntry = { ...entry, isUpdate: true }
    if (this.#waiter !== undefined) {
      const { resolve } = this.#waiter
      this.#waiter = undefined
      resolve({ value: item, done: false })
      return
    }
    if (this.#items.length - this.#head >= this.#limit) {
      this.#fail(new KvError('watch_overflow', `a watch of ${this.#filter ?? 'every key'} fell ${this.#limit} changes behind; watch again`))
      return
    }
    this.#items.push(item)
  }

  /** The bucket closed: the iteration ends once the queued changes are taken. */
  end(): void {
    this.#finish()
  }

  stop(): void {
    this.#items = []
    this.#head = 0
    this.#finish()
  }

  #fail(err: KvError): void {
    this.#failure = err
    this.#items = []
    this.#head = 0
    this.#finish()
  }

  #finish(): void {
    if (this.#done) return
    this.#done = true
    this.#onStop(this)
    this.#markInitialized()
    const waiter = this.#waiter
    this.#waiter = undefined
    if (waiter === undefined) return
    if (this.#failure !== undefined) waiter.reject(this.#failure)
    else waiter.resolve({ value: undefined, done: true })
  }

  #next(): Promise<IteratorResult<KvWatchEntry>> {
    // Asked for what follows the last current value: the consumer has taken them all.
    if (this.#initialLeft === 0 && !this.#currentOpen) this.#markInitialized()
    if (this.#head < this.#items.length) {
      const value = this.#items[this.#head++] as KvWatchEntry
      if (!value.isUpdate) this.#initialLeft--
      // Drops the taken part now and then, so the array does not keep every change ever queued.
      if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
        this.#items = this.#items.slice(this.#head)
        this.#head = 0
      }
      return Promise.resolve({ value, done: false })
    }
    if (this.#failure !== undefined) {
      const err = this.#failure
      this.#failure = undefined
      return Promise.reject(err)
    }
    if (this.#done) return Promise.resolve({ value: undefined, done: true })
    if (this.#waiter !== undefined) return Promise.reject(new KvError('invalid_argument', 'a watch is read by one consumer at a time'))
    return new Promise((resolve, reject) => (this.#waiter = { resolve, reject }))
  }

  [Symbol.asyncIterator](): AsyncIterator<KvWatchEntry> {
    return {
      next: () => this.#next(),
      return: () => {
        this.stop()
        return Promise.resolve({ value: undefined, done: true })
      },
    }
  }
}
