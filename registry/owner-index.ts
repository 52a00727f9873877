/**
 * Ids grouped by the id of what owns them (keys by source, sources by agent), so that
 * listing one owner's records costs that owner's records, not the whole registry.
 */
export class OwnerIndex {
  readonly #groups = new Map<string, Set<string>>()

  add(owner: string, id: string): void {
    let group = this.#groups.get(owner)
    if (group === undefined) this.#groups.set(owner, (group = new Set()))
    group.add(id)
  }

  delete(owner: string, id: string): void {
    const group = this.#groups.get(owner)
    if (group === undefined) return
    group.delete(id)
    if (group.size === 0) this.#groups.delete(owner)
  }

  of(owner: string): ReadonlySet<string> {
    return this.#groups.get(owner) ?? EMPTY
  }
}

const EMPTY: ReadonlySet<string> = new Set()
