/**
 * What a view keeps running (refresh timers, event streams), stopped together when the
 * user signs out or the view changes, so nothing keeps reading with a forgotten token.
 */
export class ViewScope {
  readonly #stops: (() => void)[] = []
  #stopped = false

  get stopped(): boolean {
    return this.#stopped
  }

  /** Runs `fn` now and every `ms` while the scope lasts; a run still under way is not started again. */
  every(ms: number, fn: () => Promise<void>): void {
    let running = false
    const tick = () => {
      if (running || this.#stopped) return
      running = true
      fn().finally(() => {
        running = false
      })
    }
    tick()
    const timer = setInterval(tick, ms)
    this.onStop(() => clearInterval(timer))
  }

  onStop(fn: () => void): void {
    if (this.#stopped) fn()
    else this.#stops.push(fn)
  }

  stop(): void {
    if (this.#stopped) return
    this.#stopped = true
    for (const fn of this.#stops.splice(0)) fn()
  }
}
