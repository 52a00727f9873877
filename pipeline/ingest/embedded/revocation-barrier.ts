import type { RevocationBarrier, RevocationScope } from '../ports.js'

/**
 * The revocation barrier of a single gateway process: the requests past their last look
 * at their key, held in memory until they have their answers. With one process there is
 * no other gateway to wait for, so `settled` waits for every hold, whatever its scope (a
 * superset of what the port asks, and never more than the requests in flight).
 */
export class EmbeddedRevocationBarrier implements RevocationBarrier {
  readonly #held = new Set<Promise<unknown>>()

  hold(_scope: RevocationScope, answered: Promise<unknown>): void {
    this.#held.add(answered)
    const forget = () => void this.#held.delete(answered)
    answered.then(forget, forget)
  }

  async settled(_scope?: RevocationScope): Promise<void> {
    await Promise.allSettled([...this.#held])
    // The answers follow their appends in promise callbacks, with no I/O between (a pending
    // key's test mark aside, whose signal is never delivered): one turn of the loop sees them sent.
    await new Promise((resolve) => setImmediate(resolve))
  }
}
