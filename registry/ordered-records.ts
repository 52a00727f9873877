/**
 * Records by id, listed in the order they were created: by created_at, then by the
 * `order` stamp their entry carries (microseconds, which tells apart records of one
 * millisecond), then by id. Every process derives the same order from the same entries,
 * so a page cursor made by one process reads right on another; an order kept by
 * arrival would not, since a watch that starts from the current values delivers them
 * by their last change, not by their creation.
 */
export class OrderedRecords<T> {
  readonly #byId = new Map<string, { readonly record: T; readonly rank: readonly [string, number, string] }>()
  /** The sorted list, rebuilt on the next read after a record came or went. */
  #sorted: T[] | undefined = []

  get size(): number {
    return this.#byId.size
  }

  get(id: string): T | undefined {
    return this.#byId.get(id)?.record
  }

  has(id: string): boolean {
    return this.#byId.has(id)
  }

  set(id: string, record: T, createdAt: string, order: number): void {
    const held = this.#byId.get(id)
    this.#byId.set(id, { record, rank: [createdAt, order, id] })
    if (held === undefined || held.rank[0] !== createdAt || held.rank[1] !== order) this.#sorted = undefined
    else if (this.#sorted !== undefined) {
      const at = this.#sorted.indexOf(held.record)
      if (at >= 0) this.#sorted[at] = record
      else this.#sorted = undefined
    }
  }

  delete(id: string): void {
    if (this.#byId.delete(id)) this.#sorted = undefined
  }

  /** Oldest first. Not copied: read it before the next change. */
  list(): readonly T[] {
    if (this.#sorted === undefined) {
      const held = [...this.#byId.values()]
      held.sort((a, b) => compareRank(a.rank, b.rank))
      this.#sorted = held.map((h) => h.record)
    }
    return this.#sorted
  }
}

function compareRank(a: readonly [string, number, string], b: readonly [string, number, string]): number {
  if (a[0] !== b[0]) return a[0] < b[0] ? -1 : 1
  if (a[1] !== b[1]) return a[1] - b[1]
  return a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0
}

let lastStamp = 0

/** A creation stamp: microseconds since the epoch, strictly increasing in this process. */
export function creationOrder(nowMs: number): number {
  lastStamp = Math.max(lastStamp + 1, Math.floor(nowMs * 1000))
  return lastStamp
}
