/**
 * Due times of open rentals with one timer for the nearest, not one per rental: a
 * binary min-heap of (time, rental id). Entries are not removed when a rental ends
 * another way; the due handler looks the rental up and skips what no longer applies.
 */

/** setTimeout's longest delay is 2^31 − 1 ms (24.8 days); further ones are re-armed on the way. */
const MAX_DELAY_MS = 2 ** 31 - 1

export class ExpirySchedule {
  readonly #heap: Array<{ at: number; id: string }> = []
  readonly #onDue: (ids: string[]) => void
  readonly #now: () => number
  #timer: NodeJS.Timeout | undefined
  #timerAt = Number.POSITIVE_INFINITY
  #stopped = false

  constructor(onDue: (ids: string[]) => void, now: () => number) {
    this.#onDue = onDue
    this.#now = now
  }

  get size(): number {
    return this.#heap.length
  }

  add(at: number, id: string): void {
    if (this.#stopped) return
    const heap = this.#heap
    heap.push({ at, id })
    for (let i = heap.length - 1; i > 0; ) {
      const parent = (i - 1) >> 1
      if ((heap[parent] as { at: number }).at <= at) break
      ;[heap[i], heap[parent]] = [heap[parent]!, heap[i]!]
      i = parent
    }
    if (at < this.#timerAt) this.#arm()
  }

  stop(): void {
    this.#stopped = true
    clearTimeout(this.#timer)
    this.#timer = undefined
  }

  #arm(): void {
    clearTimeout(this.#timer)
    const next = this.#heap[0]
    if (next === undefined || this.#stopped) {
      this.#timer = undefined
      this.#timerAt = Number.POSITIVE_INFINITY
      return
    }
    this.#timerAt = next.at
    this.#timer = setTimeout(() => this.#fire(), Math.min(MAX_DELAY_MS, Math.max(0, next.at - this.#now())))
    // Never what keeps the process alive.
    this.#timer.unref()
  }

  #fire(): void {
    this.#timer = undefined
    this.#timerAt = Number.POSITIVE_INFINITY
    const now = this.#now()
    const due: string[] = []
    while (this.#heap.length > 0 && (this.#heap[0] as { at: number }).at <= now) due.push(this.#pop())
    this.#arm()
    if (due.length > 0) this.#onDue(due)
  }

  #pop(): string {
    const heap = this.#heap
    const top = heap[0]!
    const last = heap.pop()!
    if (heap.length > 0) {
      heap[0] = last
      for (let i = 0; ; ) {
        const l = 2 * i + 1
        const r = l + 1
        let m = i
        if (l < heap.length && heap[l]!.at < heap[m]!.at) m = l
        if (r < heap.length && heap[r]!.at < heap[m]!.at) m = r
        if (m === i) break
        ;[heap[i], heap[m]] = [heap[m]!, heap[i]!]
        i = m
      }
    }
    return top.id
  }
}
