export const PROVEN_ADDRESSES = {
  /** How long an address stays proven after a fresh, validly signed request (renewed at most once a minute). */
  forMs: 60 * 60 * 1000,
  /** A proof is not renewed more often than this: one Map write a minute per address, not one per request. */
  renewAfterMs: 60 * 1000,
  /** Addresses kept per key: a creator's servers, with room; past it the key's least recently proven goes. */
  perKey: 16,
  /** Addresses kept over all keys, about 6 MB; past it the fullest key loses its least recently proven. */
  max: 65_536,
} as const

/**
 * The client addresses that recently sent a validly signed request with a fresh nonce
 * under a key: its creator's servers. A source id and key id travel in clear, so anyone
 * can send requests under them whose signatures fail, and each costs a verification and
 * a place among the slow uploads. The edge counts requests from a proven address apart
 * from the others of the same source, so a forged flood fills only the unproven lane
 * and the creator's own servers keep theirs.
 *
 * Proofs are per key: once a leaked key is revoked, the addresses it proved do not
 * count for the source's other keys. A replayed request proves nothing: the edge proves
 * an address only once the request's nonce is claimed. Full, the store drops from the
 * key holding the most addresses, so a creator proving addresses by the thousand pushes
 * out its own, not other creators'. An address is what ClientAddresses makes of the
 * request: an IPv4 address, or the /64 prefix of an IPv6 one.
 */
export class ProvenAddresses {
  readonly #now: () => number
  /** Key id → address → when last proven, least recently proven first. */
  readonly #byKey = new Map<string, Map<string, number>>()
  /** Key ids by how many addresses they hold (the index), to find the fullest at once. */
  readonly #bySize: Array<Set<string>> = Array.from({ length: PROVEN_ADDRESSES.perKey + 1 }, () => new Set())
  #size = 0

  constructor(now: () => number) {
    this.#now = now
  }

  get size(): number {
    return this.#size
  }

  isProven(keyId: string, address: string): boolean {
    const at = this.#byKey.get(keyId)?.get(address)
    return at !== undefined && this.#now() - at < PROVEN_ADDRESSES.forMs
  }

  prove(keyId: string, address: string): void {
    const now = this.#now()
    let addresses = this.#byKey.get(keyId)
    const at = addresses?.get(address)
    if (addresses !== undefined && at !== undefined) {
      if (now - at < PROVEN_ADDRESSES.renewAfterMs) return
      // Deleted first, so the Map's order stays the order of the last proof.
      addresses.delete(address)
      addresses.set(address, now)
      return
    }
    if (addresses !== undefined && addresses.size >= PROVEN_ADDRESSES.perKey) this.#dropOldest(keyId)
    else if (this.#size >= PROVEN_ADDRESSES.max) this.#dropOldest(this.#fullest())
    // Looked up again: dropping a key's last address removes its map.
    addresses = this.#byKey.get(keyId)
    if (addresses === undefined) this.#byKey.set(keyId, (addresses = new Map()))
    this.#resized(keyId, addresses.size, addresses.size + 1)
    addresses.set(address, now)
    this.#size += 1
  }

  #fullest(): string {
    for (let n = PROVEN_ADDRESSES.perKey; n > 0; n--) {
      const keys = this.#bySize[n] as Set<string>
      if (keys.size > 0) return keys.values().next().value as string
    }
    throw new Error('no proven address to drop')
  }

  #dropOldest(keyId: string): void {
    const addresses = this.#byKey.get(keyId) as Map<string, number>
    addresses.delete(addresses.keys().next().value as string)
    this.#size -= 1
    this.#resized(keyId, addresses.size + 1, addresses.size)
    if (addresses.size === 0) this.#byKey.delete(keyId)
  }

  #resized(keyId: string, from: number, to: number): void {
    if (from > 0) this.#bySize[from]?.delete(keyId)
    if (to > 0) this.#bySize[to]?.add(keyId)
  }
}

/** The holder that `holder`'s requests are counted under in shared stores: its own, or its unproven lane. */
export function laneOf(holder: string, fromProven: boolean): string {
  return fromProven ? holder : `${holder}\0unproven`
}
