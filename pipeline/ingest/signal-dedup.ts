/**
 * What the gateway remembers of each accepted signal, keyed both by
 * (source_id, signal_id) and by (source_id, Idempotency-Key), for the dedup window.
 * A retry with the same raw body gets the original `received_at` back; a different
 * body is a conflict (spec 3.2, DESIGN.md section 4).
 *
 * Memory: about 250 bytes per accepted signal (two map entries sharing one record),
 * so 1,000 signals/s held for 30 minutes is about 450 MB. The window is a setting.
 */
export interface DedupRecord {
  readonly bodySha256: string
  readonly signalId: string
  readonly receivedAt: string
  readonly test: boolean
  /** When the entry stops being remembered, ms since the epoch. */
  readonly expiresAt: number
}

export type DedupLookup =
  | { readonly kind: 'new' }
  | { readonly kind: 'replay'; readonly record: DedupRecord }
  | { readonly kind: 'conflict'; readonly record: DedupRecord }
  /** Another request with the same id is between check and append: wait for it. */
  | { readonly kind: 'in_flight'; readonly settled: Promise<void> }

export class SignalDedup {
  readonly #windowMs: number
  readonly #bySignal = new Map<string, DedupRecord>()
  readonly #byIdempotencyKey = new Map<string, DedupRecord>()
  readonly #inFlight = new Map<string, Promise<void>>()

  constructor(options: { windowMs: number }) {
    this.#windowMs = options.windowMs
  }

  get size(): number {
    return this.#bySignal.size
  }

  lookup(sourceId: string, signalId: string, idempotencyKey: string | undefined, bodySha256: string, now: number): DedupLookup {
    this.#expire(now, 8)
    const signalKey = `${sourceId}\n${signalId}`
    const pending = this.#inFlight.get(signalKey) ?? (idempotencyKey === undefined ? undefined : this.#inFlight.get(`${sourceId}\n\n${idempotencyKey}`))
    if (pending !== undefined) return { kind: 'in_flight', settled: pending }
    const record =
      this.#live(this.#bySignal.get(signalKey), now) ??
      (idempotencyKey === undefined ? undefined : this.#live(this.#byIdempotencyKey.get(`${sourceId}\n${idempotencyKey}`), now))
    if (record === undefined) return { kind: 'new' }
    return record.bodySha256 === bodySha256 && record.signalId === signalId ? { kind: 'replay', record } : { kind: 'conflict', record }
  }

  /**
   * Marks the ids as being appended, so a concurrent duplicate waits instead of
   * racing to a second append. Returns the function that ends the reservation.
   */
  reserve(sourceId: string, signalId: string, idempotencyKey: string | undefined): () => void {
    let release!: () => void
    const settled = new Promise<void>((resolve) => (release = resolve))
    const keys = [`${sourceId}\n${signalId}`]
    if (idempotencyKey !== undefined) keys.push(`${sourceId}\n\n${idempotencyKey}`)
    for (const key of keys) this.#inFlight.set(key, settled)
    return () => {
      for (const key of keys) this.#inFlight.delete(key)
      release()
    }
  }

  remember(sourceId: string, idempotencyKey: string | undefined, record: Omit<DedupRecord, 'expiresAt'>, acceptedAt: number): void {
    const entry: DedupRecord = { ...record, expiresAt: acceptedAt + this.#windowMs }
    this.#bySignal.set(`${sourceId}\n${record.signalId}`, entry)
    if (idempotencyKey !== undefined) this.#byIdempotencyKey.set(`${sourceId}\n${idempotencyKey}`, entry)
  }

  #live(record: DedupRecord | undefined, now: number): DedupRecord | undefined {
    return record !== undefined && record.expiresAt > now ? record : undefined
  }

  #expire(now: number, budget: number): void {
    for (const map of [this.#bySignal, this.#byIdempotencyKey]) {
      let left = budget
      for (const [key, record] of map) {
        if (record.expiresAt > now || left-- === 0) break
        map.delete(key)
      }
    }
  }

  sweep(now: number): void {
    this.#expire(now, Number.POSITIVE_INFINITY)
  }
}
