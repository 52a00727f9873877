import { ApiError } from '../schemas/index.js'
import { OrderedRecords } from './ordered-records.js'
import type { DisputeRecord } from './records.js'

/**
 * Bounds on disputes. Each is something the review must read: at most about 25 KB each
 * (ids and text escaped in JSON). The bound per source is kept exactly (a source's
 * disputes are one entry of the registry bucket, written at its expected revision); the
 * bounds per creator and in all are checked against what this process knows, so
 * processes racing may pass them by the few disputes opened at the same moment.
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
 * The disputes of every source as last stored, and the signals that accepted disputes
 * moved to state `disputed`: a signal named by an accepted dispute. Disputes are never
 * dropped and a decision is never undone, so a signal once disputed stays disputed.
 * A source's disputes are replaced as a whole when its entry changes.
 */
export class Disputes {
  readonly #all = new OrderedRecords<DisputeRecord>()
  /** Per source, oldest first. */
  readonly #bySource = new Map<string, readonly DisputeRecord[]>()
  readonly #perCreator = new Map<string, number>()
  /** Per source: signal id → the accepted dispute that names it first. */
  readonly #disputed = new Map<string, Map<string, string>>()
  /** Per source: the accepted disputes in the order renters receive them (`deliveryOrder`). */
  readonly #accepted = new Map<string, DisputeRecord[]>()

  /**
   * Takes the source's disputes as stored; returns those that are new or changed state
   * since the last copy (what the dispute watchers are told).
   */
  replace(sourceId: string, stored: readonly DisputeRecord[]): DisputeRecord[] {
    const before = this.#bySource.get(sourceId) ?? []
    const old = new Map(before.map((d) => [d.dispute_id, d]))
    for (const d of before) {
      this.#all.delete(d.dispute_id)
      this.#perCreator.set(d.creator_id, this.ofCreator(d.creator_id) - 1)
    }
    const records = stored.map(normalized)
    const changed: DisputeRecord[] = []
    const disputed = new Map<string, string>()
    const accepted: DisputeRecord[] = []
    for (const r of records) {
      this.#all.set(r.dispute_id, r, r.created_at, 0)
      this.#perCreator.set(r.creator_id, this.ofCreator(r.creator_id) + 1)
      if (old.get(r.dispute_id)?.state !== r.state) changed.push(r)
      if (r.state !== 'accepted') continue
      for (const s of r.signals) if (!disputed.has(s.signal_id)) disputed.set(s.signal_id, r.dispute_id)
      accepted.push(r)
    }
    accepted.sort(deliveryOrder)
    setOrDelete(this.#bySource, sourceId, records)
    setOrDelete(this.#disputed, sourceId, disputed)
    setOrDelete(this.#accepted, sourceId, accepted)
    return changed
  }

  /** The accept_order the next accepted dispute of this source takes: after every one it accepted. */
  nextAcceptOrder(sourceId: string): number {
    return this.of(sourceId).reduce((max, d) => Math.max(max, d.accept_order ?? 0), 0) + 1
  }

  /** The source's accepted disputes in the order renters receive them: by after_seq, then accept_order. */
  acceptedOf(sourceId: string): readonly DisputeRecord[] {
    return this.#accepted.get(sourceId) ?? []
  }

  get size(): number {
    return this.#all.size
  }

  get(sourceId: string, disputeId: string): DisputeRecord | undefined {
    const record = this.#all.get(disputeId)
    return record?.source_id === sourceId ? record : undefined
  }

  /** Oldest first. */
  of(sourceId: string): readonly DisputeRecord[] {
    return this.#bySource.get(sourceId) ?? []
  }

  ofCreator(creatorId: string): number {
    return this.#perCreator.get(creatorId) ?? 0
  }

  /** Every dispute, in the order they were opened. */
  all(): DisputeRecord[] {
    return [...this.#all.list()]
  }

  /** The accepted dispute that moved the signal to state disputed, if one did. */
  disputeOf(sourceId: string, signalId: string): string | undefined {
    return this.#disputed.get(sourceId)?.get(signalId)
  }

  /**
   * Refuses a new dispute of `creatorId` naming `signalIds` among the source's
   * `disputes` (its stored entry) when one is already named by a live dispute (naming
   * it again would only take another place of the bounds), or when a bound is reached.
   */
  checkCanOpen(disputes: readonly DisputeRecord[], creatorId: string, signalIds: readonly string[]): void {
    const named = new Set(signalIds)
    for (const other of disputes) {
      if (other.state === 'rejected') continue
      const again = other.signals.find((s) => named.has(s.signal_id))
      if (again !== undefined) throw new ApiError('already_exists', `signal ${again.signal_id} is already named by dispute ${other.dispute_id} (${other.state})`)
    }
    if (disputes.length >= DISPUTE_LIMITS.perSource) {
      throw new ApiError('limit_exceeded', `a source holds at most ${DISPUTE_LIMITS.perSource} disputes`)
    }
    if (this.ofCreator(creatorId) >= DISPUTE_LIMITS.perCreator) {
      throw new ApiError('limit_exceeded', `a creator holds at most ${DISPUTE_LIMITS.perCreator} disputes over all its sources`)
    }
    if (this.size >= DISPUTE_LIMITS.total) throw new ApiError('limit_exceeded', 'the registry holds no more disputes: ask the operator')
  }
}

/**
 * The record with the fields disputes stored before they were kept: an accepted one
 * gets after_seq the greatest seq among its signals and accept_order 0, which every
 * process derives alike.
 */
function normalized(r: DisputeRecord): DisputeRecord {
  if (r.state === 'accepted') {
    return r.after_seq != null && r.accept_order != null ? r : { ...r, after_seq: r.after_seq ?? greatestSignalSeq(r), accept_order: r.accept_order ?? 0 }
  }
  return r.after_seq !== undefined && r.accept_order !== undefined ? r : { ...r, after_seq: r.after_seq ?? null, accept_order: r.accept_order ?? null }
}

function setOrDelete<V extends { readonly length: number } | { readonly size: number }>(map: Map<string, V>, key: string, value: V): void {
  if (('length' in value ? value.length : value.size) === 0) map.delete(key)
  else map.set(key, value)
}

/** The greatest log seq among the dispute's signals: the earliest place its events can be delivered. */
export function greatestSignalSeq(record: DisputeRecord): number {
  return record.signals.reduce((max, s) => Math.max(max, s.seq), 0)
}

/** Negative when accepted dispute `a` is delivered before `b`. */
export function deliveryOrder(a: DisputeRecord, b: DisputeRecord): number {
  return (a.after_seq ?? 0) - (b.after_seq ?? 0) || (a.accept_order ?? 0) - (b.accept_order ?? 0)
}
