import type { NonceClaim, NonceClaimRequest, NonceClaims } from '../ports.js'
import type { NonceStore } from './nonce-store.js'

/**
 * Nonce claims in this process's NonceStore: a claim checks and inserts in one call, so
 * concurrent claims of one nonce cannot both win. The store lives as long as the process;
 * a restart gets its nonces back from the signal log, the refusal history and the retry
 * notes (IngestState.recover).
 */
export class EmbeddedNonceClaims implements NonceClaims {
  /** Read on every call: a saved state that turns out unusable at start replaces the store. */
  readonly #store: () => NonceStore

  constructor(store: () => NonceStore) {
    this.#store = store
  }

  claim(r: NonceClaimRequest): Promise<NonceClaim> {
    return Promise.resolve(this.#store().claim(r.sourceId, r.keyId, r.nonce, r.now, r.sourceCap))
  }

  get size(): number {
    return this.#store().size
  }
}
