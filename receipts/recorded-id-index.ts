import { RecordedIdFilter } from './recorded-id-filter.js'

/** The smallest filter built: 1,000,000 ids in 1.25 MB. */
export const RECORDED_ID_FILTER_MIN_IDS = 1_000_000
/**
 * The largest: 50,000,000 ids in 62.5 MB, a bound on the recorder's memory. A store holding
 * more fills it past capacity, and more ids are looked up (all of them once it is full):
 * slower, never wrong.
 */
export const RECORDED_ID_FILTER_MAX_IDS = 50_000_000

export interface RecordedIdSource {
  /** Ids listed in the store now (an id listed twice may count twice). */
  count(): Promise<number>
  /** The filter key (receiptKeyOf) of every id listed in the store. */
  keys(): AsyncIterable<string>
}

/**
 * The filter of recorded ids the store consults before its look-up: built from every id
 * the store lists, then given each id a batch recorded or found. Built twice the size of
 * what is stored, and built again (larger) once it holds more ids than its capacity.
 *
 * Ids recorded while a build reads the store go into the filter being built too, so none
 * is missed between the read's snapshot and the switch. Until the first build completes
 * there is no filter, and every id is looked up.
 */
export class RecordedIdIndex {
  readonly #source: RecordedIdSource
  #current: RecordedIdFilter | undefined
  #next: RecordedIdFilter | undefined
  #building: Promise<void> | undefined

  constructor(source: RecordedIdSource) {
    this.#source = source
  }

  /** The filter to consult; undefined while none is built. */
  filter(): RecordedIdFilter | undefined {
    return this.#current
  }

  /** Builds the filter from the store again; resolves once it is in use. */
  build(): Promise<void> {
    this.#building ??= this.#build().finally(() => (this.#building = undefined))
    return this.#building
  }

  async #build(): Promise<void> {
    const stored = await this.#source.count()
    const next = new RecordedIdFilter(Math.min(RECORDED_ID_FILTER_MAX_IDS, Math.max(RECORDED_ID_FILTER_MIN_IDS, 2 * stored)))
    this.#next = next
    try {
      for await (const key of this.#source.keys()) next.addKey(key)
    } catch (err) {
      if (this.#next === next) this.#next = undefined
      throw err
    }
    if (this.#next !== next) return
    this.#current = next
    this.#next = undefined
  }

  /** Ids now recorded (written, or found already there). */
  add(receiptIds: Iterable<string>): void {
    const current = this.#current
    const next = this.#next
    for (const id of receiptIds) {
      current?.add(id)
      next?.add(id)
    }
    if (current !== undefined && current.added > current.capacity && current.capacity < RECORDED_ID_FILTER_MAX_IDS) void this.build().catch(() => {})
  }

  /** Drops the filter: every id is looked up until the next build. */
  clear(): void {
    this.#current = undefined
    this.#next = undefined
  }
}
