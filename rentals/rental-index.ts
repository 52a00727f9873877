import type { RentalRecord } from './records.js'

export interface IndexedRental {
  readonly record: RentalRecord
  /** The bucket revision of the record: a change is taken only if newer. */
  readonly revision: number
}

/** Ordering of lists: oldest first, by created_at, then rental_id for the same millisecond. */
function before(a: RentalRecord, b: RentalRecord): boolean {
  const ta = Date.parse(a.created_at)
  const tb = Date.parse(b.created_at)
  return ta < tb || (ta === tb && a.rental_id < b.rental_id)
}

/**
 * Every rental of the bucket in memory, kept from its watch (so changes made by other
 * processes arrive too) and from this process's own writes as they resolve: by id, by
 * renter, by source, and in list order. Changes are taken by revision, so one seen twice
 * (a write's answer, then its watch entry) or late changes nothing.
 */
export class RentalIndex {
  readonly #byId = new Map<string, IndexedRental>()
  readonly #byRenter = new Map<string, Set<string>>()
  readonly #bySource = new Map<string, Set<string>>()
  /** In list order (`before`). */
  readonly #ordered: RentalRecord[] = []

  get size(): number {
    return this.#byId.size
  }

  get(rentalId: string): IndexedRental | undefined {
    return this.#byId.get(rentalId)
  }

  /** Takes a stored record; false if the index already holds it at this revision or later. */
  put(record: RentalRecord, revision: number): boolean {
    const held = this.#byId.get(record.rental_id)
    if (held !== undefined && held.revision >= revision) return false
    if (held !== undefined) this.#removeOrdered(held.record)
    this.#byId.set(record.rental_id, { record, revision })
    addTo(this.#byRenter, record.renter_id, record.rental_id)
    addTo(this.#bySource, record.source_id, record.rental_id)
    this.#insertOrdered(record)
    return true
  }

  /** Drops a deleted record (a deletion seen at `revision`). */
  remove(rentalId: string, revision: number): IndexedRental | undefined {
    const held = this.#byId.get(rentalId)
    if (held === undefined || held.revision >= revision) return undefined
    this.#byId.delete(rentalId)
    removeFrom(this.#byRenter, held.record.renter_id, rentalId)
    removeFrom(this.#bySource, held.record.source_id, rentalId)
    this.#removeOrdered(held.record)
    return held
  }

  /** Every rental, in list order. */
  all(): readonly RentalRecord[] {
    return this.#ordered
  }

  /** A renter's or a source's rentals, in list order. */
  ofRenter(renterId: string): RentalRecord[] {
    return this.#records(this.#byRenter.get(renterId))
  }

  ofSource(sourceId: string): RentalRecord[] {
    return this.#records(this.#bySource.get(sourceId))
  }

  #records(ids: Set<string> | undefined): RentalRecord[] {
    if (ids === undefined) return []
    const out = [...ids].map((id) => (this.#byId.get(id) as IndexedRental).record)
    return out.sort((a, b) => (before(a, b) ? -1 : before(b, a) ? 1 : 0))
  }

  #position(record: RentalRecord): number {
    let lo = 0
    let hi = this.#ordered.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (before(this.#ordered[mid] as RentalRecord, record)) lo = mid + 1
      else hi = mid
    }
    return lo
  }

  #insertOrdered(record: RentalRecord): void {
    // New rentals are the newest: the end of the list, without a move.
    const last = this.#ordered[this.#ordered.length - 1]
    if (last === undefined || before(last, record)) this.#ordered.push(record)
    else this.#ordered.splice(this.#position(record), 0, record)
  }

  #removeOrdered(record: RentalRecord): void {
    const at = this.#position(record)
    if (this.#ordered[at]?.rental_id === record.rental_id) this.#ordered.splice(at, 1)
  }
}

function addTo(map: Map<string, Set<string>>, key: string, id: string): void {
  let set = map.get(key)
  if (set === undefined) map.set(key, (set = new Set()))
  set.add(id)
}

function removeFrom(map: Map<string, Set<string>>, key: string, id: string): void {
  const set = map.get(key)
  if (set === undefined) return
  set.delete(id)
  if (set.size === 0) map.delete(key)
}
