import type { PlacementMark } from '../pipeline/index.js'

/**
 * How long a delivery channel waits at a dispute placement for the dispute to be
 * recorded, counted from the time the log stored the placement. Past it the channel
 * passes over the placement: the accepting process died between its append and its
 * registry write, or the write failed.
 */
export const PLACEMENT_WAIT_MS = 10_000
/**
 * How long an acceptance may take from before its append to the start of its registry
 * write; past it the acceptance is refused (503 not_ready) and never recorded, since
 * channels may pass over the placement once PLACEMENT_WAIT_MS has gone by. The 7 s
 * between the two cover the write itself, the registry's propagation to delivery
 * processes, and the clocks of the processes differing.
 */
export const PLACEMENT_WRITE_MS = 3_000

/** A dispute's state as this process's registry holds it, or undefined when it holds none. */
export type DisputeStateOf = (sourceId: string, disputeId: string) => string | undefined

/**
 * Tells a delivery channel when it may go past a dispute placement it met in the log
 * (pipeline/dispute-placement.ts): once the registry holds the dispute decided (accepted,
 * with its `after_seq` naming the placement where it was placed there, or rejected, or
 * accepted at another placement), or once PLACEMENT_WAIT_MS after the placement was
 * stored says the dispute will not be recorded there. A channel meets the placement in
 * its own reading of the log, in every process, so the order comes from the log alone:
 * the dispute's events, placed after the placement, go before any later record.
 */
export class DisputeGate {
  readonly #stateOf: DisputeStateOf
  readonly #now: () => number
  readonly #waitMs: number
  #waiters: (() => void)[] = []

  constructor(stateOf: DisputeStateOf, now: () => number = Date.now, waitMs = PLACEMENT_WAIT_MS) {
    this.#stateOf = stateOf
    this.#now = now
    this.#waitMs = waitMs
  }

  /** Whether a channel may go past the placement now. */
  settled(mark: PlacementMark): boolean {
    const state = this.#stateOf(mark.sourceId, mark.disputeId)
    return (state !== undefined && state !== 'open') || this.#now() >= mark.time + this.#waitMs
  }

  /** Resolves once the placement is settled. */
  async until(mark: PlacementMark): Promise<void> {
    while (!this.settled(mark)) {
      const left = Math.max(1, mark.time + this.#waitMs - this.#now())
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.#waiters.push(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    }
  }

  /** The registry's disputes changed: waiting channels look again. */
  changed(): void {
    const waiters = this.#waiters
    this.#waiters = []
    for (const w of waiters) w()
  }
}
