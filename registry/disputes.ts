import type { DisputeRecord } from './records.js'

/** Bounds on disputes: each one a review must read, so they are few and short. */
export const DISPUTE_LIMITS = {
  /** Disputes kept per source, whatever their state; a source that needs more has a deeper problem than a leaked key. */
  perSource: 64,
  /** Signal ids one dispute names. */
  signalsPerDispute: 100,
  /** Characters of evidence, and of the review's resolution note. */
  textChars: 4000,
} as const

/**
 * The disputes of every source, and the signals that accepted disputes put in state
 * `disputed` (spec 3.2). Disputes are never dropped and an accepted one is never
 * undone, so a signal once disputed stays disputed. The methods that change state
 * return how to undo it, for a change the registry could not record.
 */
export class Disputes {
  readonly #byId = new Map<string, DisputeRecord>()
  /** Per source, oldest first. */
  readonly #bySource = new Map<string, DisputeRecord[]>()
  /** Per source, the signal ids of its accepted disputes. */
  readonly #disputed = new Map<string, Set<string>>()

  constructor(records: readonly DisputeRecord[] = []) {
    for (const r of [...records].sort((a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0))) {
      this.add(r)
      if (r.state === 'accepted') this.markDisputed(r)
    }
  }

  get(sourceId: string, disputeId: string): DisputeRecord | undefined {
    const record = this.#byId.get(disputeId)
    return record?.source_id === sourceId ? record : undefined
  }

  /** Oldest first. */
  of(sourceId: string): readonly DisputeRecord[] {
    return this.#bySource.get(sourceId) ?? []
  }

  all(): DisputeRecord[] {
    return [...this.#byId.values()]
  }

  isDisputed(sourceId: string, signalId: string): boolean {
    return this.#disputed.get(sourceId)?.has(signalId) === true
  }

  add(record: DisputeRecord): () => void {
    this.#byId.set(record.dispute_id, record)
    let list = this.#bySource.get(record.source_id)
    if (list === undefined) this.#bySource.set(record.source_id, (list = []))
    list.push(record)
    return () => {
      this.#byId.delete(record.dispute_id)
      list.pop()
      if (list.length === 0) this.#bySource.delete(record.source_id)
    }
  }

  /** Puts the dispute's signals in state `disputed`. */
  markDisputed(record: DisputeRecord): () => void {
    let set = this.#disputed.get(record.source_id)
    if (set === undefined) this.#disputed.set(record.source_id, (set = new Set()))
    const added = record.signal_ids.filter((id) => !set.has(id))
    for (const id of added) set.add(id)
    return () => {
      for (const id of added) set.delete(id)
      if (set.size === 0) this.#disputed.delete(record.source_id)
    }
  }
}
