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
  /** Per source: the accepted disputes in the order renters receive them (`deliveryOrder`). */
  readonly #accepted = new Map<string, DisputeRecord[]>()
  #lastAcceptOrder = 0

  /** `records` in the order they were opened (the registry file keeps it). */
  constructor(records: readonly DisputeRecord[] = []) {
    for (const r of records) {
      if (r.state === 'accepted') {
        // Accepted before positions were kept: the greatest seq among its signals, which every process derives alike.
        r.after_seq ??= greatestSignalSeq(r)
        r.accept_order ??= 0
      } else {
        r.after_seq ??= null
        r.accept_order ??= null
      }
      this.add(r)
      if (r.state === 'accepted') {
        this.markDisputed(r)
        this.fileForDelivery(r)
      }
    }
  }

  /** The accept_order the next accepted dispute takes. */
  nextAcceptOrder(): number {
    return this.#lastAcceptOrder + 1
  }

  /** The source's recorded accepted disputes in the order renters receive them: by after_seq, then accept_order. */
  acceptedOf(sourceId: string): readonly DisputeRecord[] {
    return this.#accepted.get(sourceId) ?? []
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

  /** Moves the dispute's signals to state `disputed`, and files it for delivery at its after_seq and accept_order. */
  markDisputed(record: DisputeRecord): () => void {
    let signals = this.#disputed.get(record.source_id)
    if (signals === undefined) this.#disputed.set(record.source_id, (signals = new Map()))
    const added = record.signals.map((s) => s.signal_id).filter((id) => !signals.has(id))
    for (const id of added) signals.set(id, record.dispute_id)
    const lastOrder = this.#lastAcceptOrder
    this.#lastAcceptOrder = Math.max(lastOrder, record.accept_order ?? 0)
    return () => {
      for (const id of added) signals.delete(id)
      if (signals.size === 0) this.#disputed.delete(record.source_id)
      this.#lastAcceptOrder = lastOrder
    }
  }

  /**
   * Files an accepted dispute for delivery, once it is recorded (a change that could not
   * be recorded is undone, and renters must never have been told of it). Idempotent.
   */
  fileForDelivery(record: DisputeRecord): void {
    if (record.state !== 'accepted') return
    let accepted = this.#accepted.get(record.source_id)
    if (accepted === undefined) this.#accepted.set(record.source_id, (accepted = []))
    if (accepted.includes(record)) return
    const at = accepted.findIndex((other) => deliveryOrder(record, other) < 0)
    accepted.splice(at < 0 ? accepted.length : at, 0, record)
  }
}

/** The greatest log seq among the dispute's signals: the earliest place its events can be delivered. */
export function greatestSignalSeq(record: DisputeRecord): number {
  return record.signals.reduce((max, s) => Math.max(max, s.seq), 0)
}

/** Negative when accepted dispute `a` is delivered before `b`. */
export function deliveryOrder(a: DisputeRecord, b: DisputeRecord): number {
  return (a.after_seq ?? 0) - (b.after_seq ?? 0) || (a.accept_order ?? 0) - (b.accept_order ?? 0)
}
