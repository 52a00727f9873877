/**
 * Group commit: items submitted while a commit is in flight wait and go out together
 * in the next one. With fdatasync costing the same for 1 record as for 1,000, this is
 * what turns a sync-per-append log (a few thousand appends/s) into one whose
 * throughput grows with concurrency.
 *
 * Each `submit` resolves only once the commit that carried its item has completed,
 * and rejects with that commit's error. Commits never overlap.
 */

interface Waiter<T> {
  readonly item: T
  readonly size: number
  readonly resolve: () => void
  readonly reject: (err: unknown) => void
}

export interface GroupCommitOptions<T> {
  /** Writes and makes durable one batch, in submission order. */
  readonly commit: (items: T[]) => Promise<void>
  /** Size of an item for `maxBatchBytes`; 1 by default. */
  readonly sizeOf?: (item: T) => number
  /**
   * Upper bound on one batch. A burst of a hundred thousand appends would otherwise
   * become one giant buffer (memory spike, and every append waits for the last byte).
   */
  readonly maxBatchBytes?: number
}

export class GroupCommit<T> {
  readonly #commit: (items: T[]) => Promise<void>
  readonly #sizeOf: (item: T) => number
  readonly #maxBatch: number
  #queue: Waiter<T>[] = []
  #running: Promise<void> | undefined
  #scheduled = false

  constructor(opts: GroupCommitOptions<T>) {
    this.#commit = opts.commit
    this.#sizeOf = opts.sizeOf ?? (() => 1)
    this.#maxBatch = opts.maxBatchBytes ?? Number.POSITIVE_INFINITY
  }

  /** Items waiting for a commit, plus those in the commit under way. */
  get busy(): boolean {
    return this.#running !== undefined || this.#queue.length > 0
  }

  submit(item: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ item, size: this.#sizeOf(item), resolve, reject })
      if (this.#running === undefined && !this.#scheduled) {
        // Deferred to a microtask so that appends issued in the same tick share the
        // first commit instead of the first one going out alone.
        this.#scheduled = true
        queueMicrotask(() => {
          this.#scheduled = false
          if (this.#running === undefined) this.#running = this.#run()
        })
      }
    })
  }

  /** Resolves once everything submitted so far has been committed or has failed. */
  async drain(): Promise<void> {
    while (this.busy || this.#scheduled) {
      if (this.#running !== undefined) await this.#running
      else await new Promise<void>((resolve) => queueMicrotask(resolve))
    }
  }

  async #run(): Promise<void> {
    try {
      while (this.#queue.length > 0) {
        const batch = this.#take()
        try {
          await this.#commit(batch.map((w) => w.item))
          for (const w of batch) w.resolve()
        } catch (err) {
          for (const w of batch) w.reject(err)
        }
      }
    } finally {
      this.#running = undefined
    }
  }

  #take(): Waiter<T>[] {
    let bytes = 0
    let n = 0
    // Always take at least one item, so an item larger than the bound still goes out.
    while (n < this.#queue.length && (n === 0 || bytes + this.#queue[n]!.size <= this.#maxBatch)) {
      bytes += this.#queue[n]!.size
      n++
    }
    if (n === this.#queue.length) {
      const all = this.#queue
      this.#queue = []
      return all
    }
    return this.#queue.splice(0, n)
  }
}
