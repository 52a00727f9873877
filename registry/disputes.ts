import { ApiError } from '../schemas/index.js'
import type { DisputeRecord } from './records.js'

/**
 * Bounds on disputes. Each is something the review must read, and together they sit in
 * the registry file: at most about 25 KB each (ids and text escaped in JSON), 100 MB in all.
 */
export const DISPUTE_LIMITS = {
  /** Disputes kept per source, whatever their state. */
  perSource: 16,
  /** Per creator, over all its sources. */
  perCreator: 64,
  /** In the registry. */
  total: 4096,
  /** Signals one dispute names. */
  signalsPerDispute: 100,
  /** Characters of evidence, and of the review's resolution note. */
  textChars: 1000,
} as const

/**
 * The disputes of every source, and the signals that accepted disputes moved to state
 * `disputed` (spec 3.2). Disputes are never dropped and a decision is never undone, so
 * a signal once disputed stays disputed. The methods that change state return how to
 * undo it, for a change the registry could not record.
 */
export class Disputes {
  readonly #byId = new Map<string, DisputeRecord>()
  /** Per source, oldest first. */
  readonly #bySource = new Map<string, DisputeRecord[]>()
  readonly #perCreator = new Map<string, number>()
  /** Per source: signal id → the accepted dispute that names it first. */
  readonly #disputed = new Map<string, Map<string, string>>()

  /** `records` in the order they were opened (the registry file keeps it). */
  constructor(records: readonly DisputeRecord[] = []) {
    for (const r of records) {
      this.add(r)
      if (r.state === 'accepted') this.markDisputed(r)
    }
  }

  get size(): number {
    return this.#byId.size
  }

  get(sourceId: string, disputeId: string): DisputeRecord | undefined {
    const record = this.#byId.get(disputeId)
    return record?.source_id === sourceId ? record : undefined
  }

  /** Oldest first. */
  of(sourceId: string): readonly DisputeRecord[] {
    return this.#bySource.get(sourceId) ?? []
  }

  ofCreator(creatorId: string): number {
    return this.#perCreator.get(creatorId) ?? 0
  }

  all(): DisputeRecord[] {
    return [...this.#byId.values()]
  }

  /** The accepted dispute that moved the signal to state disputed, if one did. */
  disputeOf(sourceId: string, signalId: string): string | undefined {
    return this.#disputed.get(sourceId)?.get(signalId)
  }

  /**
   * Refuses a new dispute of `creatorId`'s source `sourceId` naming `signalIds` when one
   * is already named by a live dispute (naming it again would only take another place of
   * the bounds), or when a bound is reached.
   */
  checkCanOpen(sourceId: string, creatorId: string, signalIds: readonly string[]): void {
    const named = new Set(signalIds)
    for (const other of this.of(sourceId)) {
      if (other.state === 'rejected') continue
      const again = other.signals.find((s) => named.has(s.signal_id))
      if (again !== undefined) throw new ApiError('already_exists', `signal ${again.signal_id} is already named by dispute ${other.dispute_id} (${other.state})`)
    }
    if (this.of(sourceId).length >= DISPUTE_LIMITS.perSource) {
      throw new ApiError('limit_exceeded', `a source holds at most ${DISPUTE_LIMITS.perSource} disputes`)
    }
    if (this.ofCreator(creatorId) >= DISPUTE_LIMITS.perCreator) {
      throw new ApiError('limit_exceeded', `a creator holds at most ${DISPUTE_LIMITS.perCreator} disputes over all its sources`)
    }
    if (this.size >= DISPUTE_LIMITS.total) throw new ApiError('limit_exceeded', 'the registry holds no more disputes: ask the operator')
  }

  add(record: DisputeRecord): () => void {
    this.#byId.set(record.dispute_id, record)
    let list = this.#bySource.get(record.source_id)
    if (list === undefined) this.#bySource.set(record.source_id, (list = []))
    list.push(record)
    this.#perCreator.set(record.creator_id, this.ofCreator(record.creator_id) + 1)
    return () => {
      this.#byId.delete(record.dispute_id)
      list.pop()
      if (list.length === 0) this.#bySource.delete(record.source_id)
      this.#perCreator.set(record.creator_id, this.ofCreator(record.creator_id) - 1)
    }
  }

  /** Moves the dispute's signals to state `disputed`. */
  markDisputed(record: DisputeRecord): () => void {
    let signals = this.#disputed.get(record.source_id)
    if (signals === undefined) this.#disputed.set(record.source_id, (signals = new Map()))
    const added = record.signals.map((s) => s.signal_id).filter((id) => !signals.has(id))
    for (const id of added) signals.set(id, record.dispute_id)
    return () => {
      for (const id of added) signals.delete(id)
      if (signals.size === 0) this.#disputed.delete(record.source_id)
    }
  }
}
