import type { AcceptedSignal, SignalCheck, SignalCheckRequest, SignalIndex, SignalReservation } from '../ports.js'
import { signalDedupId } from '../signal-record.js'
import type { RetryNote } from './retry-notes.js'
import type { SignalDedup } from './signal-dedup.js'
import type { Fingerprint, SignalIdHistory } from './signal-id-history.js'

export interface EmbeddedSignalIndexOptions {
  /** Read on every call: a saved state that turns out unusable at start replaces the index. */
  readonly dedup: () => SignalDedup
  readonly history: SignalIdHistory
  /** Where a deduplicated retry's nonce and newly bound Idempotency-Key are kept, which the log does not hold. */
  readonly retryNotes?: { record(note: RetryNote): void } | undefined
  /** The log refused an append whose record it may hold (IngestState.appendRefused). */
  readonly onAppendRefused: () => void
}

/**
 * The signal index of a single gateway process: the dedup window in SignalDedup, the
 * signal ids past it in SignalIdHistory. Each check decides and reserves (or binds a
 * replay's Idempotency-Key) within one call, so no other request can come between.
 * What a restart needs comes back from the signal log, the saved state and the retry
 * notes this index writes for deduplicated retries.
 */
export class EmbeddedSignalIndex implements SignalIndex {
  readonly #o: EmbeddedSignalIndexOptions

  constructor(options: EmbeddedSignalIndexOptions) {
    this.#o = options
  }

  get size(): number {
    return this.#o.dedup().size
  }

  check(request: SignalCheckRequest): Promise<SignalCheck> {
    return Promise.resolve(this.#check(request))
  }

  logged(dedupId: string, seq: number): void {
    this.#o.history.add(this.#o.history.fingerprint(dedupId), seq)
  }

  hasAccepted(sourceId: string, signalId: string): Promise<boolean> {
    const history = this.#o.history
    return Promise.resolve(history.has(history.fingerprint(signalDedupId(sourceId, signalId))))
  }

  #check(r: SignalCheckRequest): SignalCheck {
    const dedup = this.#o.dedup()
    const found = dedup.lookup(r.sourceId, r.signalId, r.idempotencyKey, r.bodySha256, r.now)
    switch (found.kind) {
      case 'in_flight':
      case 'conflict':
        return found
      case 'replay': {
        const key = found.unboundKey
        if (key !== undefined) {
          // Bound in the turn of the lookup, so no other request can claim the key in between;
          // it takes room like a new signal's key, and is refused like one when there is none.
          const room = dedup.takeRoom(r.sourceId, key, undefined, r.now)
          if (typeof room !== 'function') return { kind: 'no_room', room }
          dedup.bindKey(r.sourceId, key, found.record)
          room()
        }
        this.#noteRetry(r, found.record, key)
        return { kind: 'replay', signal: found.record }
      }
      case 'new': {
        // Past the dedup window no body is left to compare: a signal id seen before is
        // refused, not accepted as a second signal under the same id.
        const fingerprint = this.#o.history.fingerprint(signalDedupId(r.sourceId, r.signalId))
        if (this.#o.history.has(fingerprint)) return { kind: 'reused' }
        const releaseIds = dedup.reserve(r.sourceId, r.signalId, r.idempotencyKey)
        return { kind: 'new', reservation: new EmbeddedReservation(this.#o, dedup, r, fingerprint, releaseIds) }
      }
    }
  }

  /** What the retry changed that the log does not hold: its nonce, a key it bound. */
  #noteRetry(r: SignalCheckRequest, signal: AcceptedSignal, boundKey: string | undefined): void {
    if (this.#o.retryNotes === undefined || (r.claimedNonce === undefined && boundKey === undefined)) return
    this.#o.retryNotes.record({
      source_id: r.sourceId,
      key_id: r.keyId,
      time: r.receivedAtMs,
      ...(r.claimedNonce === undefined ? {} : { nonce: r.claimedNonce }),
      ...(boundKey === undefined
        ? {}
        : { bound: { key: boundKey, signal_id: signal.signalId, body_sha256: signal.bodySha256, received_at_ms: signal.receivedAtMs, test: signal.test } }),
    })
  }
}

class EmbeddedReservation implements SignalReservation {
  readonly #o: EmbeddedSignalIndexOptions
  readonly #dedup: SignalDedup
  readonly #request: SignalCheckRequest
  /** Taken once per signal, for both the history look-up and the add. */
  readonly #fingerprint: Fingerprint
  #releaseIds: (() => void) | undefined
  #releaseRoom: (() => void) | undefined

  constructor(o: EmbeddedSignalIndexOptions, dedup: SignalDedup, request: SignalCheckRequest, fingerprint: Fingerprint, releaseIds: () => void) {
    this.#o = o
    this.#dedup = dedup
    this.#request = request
    this.#fingerprint = fingerprint
    this.#releaseIds = releaseIds
  }

  takeRoom(now: number): Promise<'ok' | 'source_full' | 'store_full'> {
    const r = this.#request
    const room = this.#dedup.takeRoom(r.sourceId, r.signalId, r.idempotencyKey, now)
    if (typeof room !== 'function') return Promise.resolve(room)
    this.#releaseRoom = room
    return Promise.resolve('ok')
  }

  accepted(signal: AcceptedSignal, appended: { readonly seq: number; readonly duplicate: boolean }, now: number): Promise<void> {
    if (!appended.duplicate) this.#o.history.add(this.#fingerprint, appended.seq)
    this.#dedup.remember(this.#request.sourceId, this.#request.idempotencyKey, signal, now)
    return Promise.resolve()
  }

  appendRefused(): void {
    this.#o.onAppendRefused()
  }

  release(): void {
    // The room first: the entries are remembered by now, or the signal was refused.
    this.#releaseRoom?.()
    this.#releaseRoom = undefined
    this.#releaseIds?.()
    this.#releaseIds = undefined
  }
}
