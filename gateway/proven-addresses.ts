import type { HttpResponse } from './http/uws.js'

export const PROVEN_ADDRESSES = {
  /** How long an address stays proven after its last fresh, validly signed request. */
  forMs: 60 * 60 * 1000,
  /** A proof is not renewed more often than this: one Map write a minute per address, not one per request. */
  renewAfterMs: 60 * 1000,
  /** Addresses kept over all sources, the least recently proven dropped first: about 2 MB. */
  max: 16_384,
} as const

/**
 * The client addresses that recently sent a source a validly signed request with a fresh
 * nonce: its creator's servers. A source id and key id travel in clear, so anyone can
 * send requests under them whose signatures fail, and each costs a verification and a
 * place among the slow uploads. Requests from a proven address are counted apart from
 * the others of the same source (`laneOf`), so a forged flood fills only the
 * unproven lane and the creator's own servers keep theirs.
 *
 * A replayed request proves nothing: the nonce it carries is already spent, and a
 * request proves its address only once its nonce is claimed. An address is its IPv4
 * address, or the /64 prefix of an IPv6 one (one client is usually given a whole /64).
 */
export class ProvenAddresses {
  readonly #now: () => number
  /** `source id \0 address` → when last proven, least recently proven first. */
  readonly #proven = new Map<string, number>()

  constructor(now: () => number) {
    this.#now = now
  }

  /** The holder `sourceOrCreator`'s requests from `address` are counted under. */
  laneOf(sourceId: string, address: string, sourceOrCreator: string): string {
    const at = this.#proven.get(`${sourceId}\0${address}`)
    return at !== undefined && this.#now() - at < PROVEN_ADDRESSES.forMs ? sourceOrCreator : `${sourceOrCreator}\0unproven`
  }

  prove(sourceId: string, address: string): void {
    const id = `${sourceId}\0${address}`
    const now = this.#now()
    const at = this.#proven.get(id)
    if (at !== undefined && now - at < PROVEN_ADDRESSES.renewAfterMs) return
    // Deleted first, so the Map's order stays the order of the last proof.
    this.#proven.delete(id)
    this.#proven.set(id, now)
    if (this.#proven.size > PROVEN_ADDRESSES.max) this.#proven.delete(this.#proven.keys().next().value as string)
  }

  get size(): number {
    return this.#proven.size
  }
}

/** 10 zero bytes and two 0xff: an IPv4 address on an IPv6 socket. */
const V4_MAPPED = Buffer.from('00000000000000000000ffff', 'hex')

/** The client's address as `ProvenAddresses` keys it: IPv4 whole, IPv6 to its /64. */
export function clientAddress(res: HttpResponse): string {
  const raw = Buffer.from(res.getRemoteAddress())
  if (raw.length === 16 && !raw.subarray(0, 12).equals(V4_MAPPED)) return raw.toString('hex', 0, 8)
  return raw.toString('hex', raw.length - 4)
}
