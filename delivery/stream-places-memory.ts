import { STREAM_CAP_RETRY_MS, StreamLimitError, StreamPlacesUnavailableError, type StreamPlace, type StreamPlaces } from './stream-places.js'

/** Places taken per rental, by every MemoryStreamPlaces made over the same counts. */
export type StreamPlaceCounts = Map<string, number>

/**
 * Places counted in this process's memory: exact when the process is the only one serving
 * the rentals' streams (the embedded backends, where the DATA_DIR lock makes it so), with
 * no write per stream. Several views over one `counts` share it (handlers of one process).
 * Memory: one entry per rental with a stream open.
 */
export class MemoryStreamPlaces implements StreamPlaces {
  readonly #max: number
  readonly #counts: StreamPlaceCounts
  readonly #mine = new Set<MemoryPlace>()
  #stopped = false

  constructor(max: number, counts: StreamPlaceCounts = new Map()) {
    this.#max = max
    this.#counts = counts
  }

  get held(): number {
    return this.#mine.size
  }

  async take(rentalId: string): Promise<StreamPlace> {
    if (this.#stopped) throw new StreamPlacesUnavailableError()
    // Checked and counted with no await between: one process, so nothing comes in between.
    const taken = this.#counts.get(rentalId) ?? 0
    if (taken >= this.#max) throw new StreamLimitError(STREAM_CAP_RETRY_MS)
    this.#counts.set(rentalId, taken + 1)
    const place = new MemoryPlace(rentalId, (p) => this.#giveBack(p))
    this.#mine.add(place)
    return place
  }

  async close(): Promise<void> {
    this.destroy()
  }

  /** A process's memory goes with it: its places are free at once. */
  destroy(): void {
    this.#stopped = true
    for (const place of [...this.#mine]) place.release()
  }

  #giveBack(place: MemoryPlace): void {
    this.#mine.delete(place)
    const left = (this.#counts.get(place.rentalId) ?? 1) - 1
    if (left <= 0) this.#counts.delete(place.rentalId)
    else this.#counts.set(place.rentalId, left)
  }
}

class MemoryPlace implements StreamPlace {
  held = true
  constructor(
    readonly rentalId: string,
    private readonly giveBack: (place: MemoryPlace) => void,
  ) {}

  release(): void {
    if (!this.held) return
    this.held = false
    this.giveBack(this)
  }
}
