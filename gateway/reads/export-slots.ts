/**
 * Exports running at once, per caller and in all. Each holds a ClickHouse query and a
 * connection for as long as its client reads, so the counts are bounded. Counted per
 * process: behind a load balancer each process holds its own.
 */
export class ExportSlots {
  readonly #perCaller: number
  readonly #total: number
  readonly #held = new Map<string, number>()
  #inUse = 0

  constructor(perCaller: number, total: number) {
    this.#perCaller = perCaller
    this.#total = total
  }

  get inUse(): number {
    return this.#inUse
  }

  /** A slot for `caller`, as the function that gives it back (once), or a refusal naming the bound. */
  take(caller: string): { release: () => void } | { refused: 'caller' | 'total' } {
    const mine = this.#held.get(caller) ?? 0
    if (mine >= this.#perCaller) return { refused: 'caller' }
    if (this.#inUse >= this.#total) return { refused: 'total' }
    this.#held.set(caller, mine + 1)
    this.#inUse++
    let held = true
    return {
      release: () => {
        if (!held) return
        held = false
        this.#inUse--
        const left = (this.#held.get(caller) ?? 1) - 1
        if (left === 0) this.#held.delete(caller)
        else this.#held.set(caller, left)
      },
    }
  }
}
