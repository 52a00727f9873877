import { readFileSync } from 'node:fs'

/** VmRSS of each NATS server, sampled every 100 ms: the highest sum of a window. */
export class NatsRssSampler {
  readonly #pids: readonly number[]
  readonly #timer: NodeJS.Timeout
  #peakMb = 0

  constructor(pids: readonly number[]) {
    this.#pids = pids
    this.#timer = setInterval(() => (this.#peakMb = Math.max(this.#peakMb, this.sumMb())), 100)
  }

  sumMb(): number {
    let kb = 0
    for (const pid of this.#pids) {
      try {
        kb += Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0)
      } catch {
        // exited
      }
    }
    return kb / 1024
  }

  /** Highest sum since the last call, and starts a new window. */
  takePeakMb(): number {
    const peak = Math.max(this.#peakMb, this.sumMb())
    this.#peakMb = 0
    return peak
  }

  stop(): void {
    clearInterval(this.#timer)
  }
}
