/**
 * One open event stream's place among its rental's STREAM_MAX_PER_RENTAL. `held` turns
 * false once it is given back, or once the process lost it (StreamPlaces, `onLost`).
 */
export interface StreamPlace {
  readonly rentalId: string
  readonly held: boolean
  /** Gives the place back; a second call, or one after the place was lost, does nothing. */
  release(): void
}

/**
 * The places of the rentals' open event streams: at most `max` streams of one rental are
 * open at once over every process counting on the same store. Asynchronous, with what a
 * key-value bucket offers, so that processes behind one load balancer share the count:
 * the KV adapter (stream-places-kv.ts) serves a cluster on NATS; the memory adapter
 * (stream-places-memory.ts) serves a process that is the only one (embedded backends).
 */
export interface StreamPlaces {
  /**
   * Takes a place among the rental's streams: StreamLimitError when `max` are held (over
   * every process), StreamPlacesUnavailableError when the store cannot tell (never a
   * place taken unguarded). `onLost` is called, once, if the process later loses the
   * place without giving it back (it could not keep it in the shared store): the stream
   * must then end, since another process may have been given the place.
   */
  take(rentalId: string, onLost: () => void): Promise<StreamPlace>
  /** Places this process holds. */
  readonly held: number
  /** Gives back every place this process holds and stops its background work. Safe to call twice. */
  close(): Promise<void>
  /**
   * Stops at once, writing nothing more, as a process killed would: the places it held are
   * free again when the store lets them expire (in memory: at once). Safe to call twice.
   */
  destroy(): void
}

/** The Retry-After hint of a stream refused by the cap: a place frees when a stream closes, which nobody can foretell. */
export const STREAM_CAP_RETRY_MS = 5000

/**
 * A stream past its rental's cap: the route answers 429 rate_limited with Retry-After.
 * `retryAfterMs` is a hint (a place frees when a stream closes, which nobody can foretell).
 */
export class StreamLimitError extends Error {
  readonly code = 'streams_limited'
  constructor(readonly retryAfterMs: number) {
    super('the rental has the most event streams open at once')
    this.name = 'StreamLimitError'
  }
}

/** The store of places cannot be read or written for now: the route answers 503 overloaded with Retry-After. */
export class StreamPlacesUnavailableError extends Error {
  readonly code = 'stream_places_unavailable'
  readonly transient = true
  constructor(options?: { cause?: unknown }) {
    super('the places of event streams cannot be counted for now', options)
    this.name = 'StreamPlacesUnavailableError'
  }
}
