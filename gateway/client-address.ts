import { isIP, type BlockList } from 'node:net'
import type { HttpRequest, HttpResponse } from './http/uws.js'

/** Forwarded hops looked at, from the right: a proxy chain is a few hops, never hundreds. */
const MAX_FORWARDED_HOPS = 16

/** 10 zero bytes and two 0xff: an IPv4 address on an IPv6 socket. */
const V4_MAPPED = Buffer.from('00000000000000000000ffff', 'hex')

/**
 * The client address a request came from: its 4 or 16 bytes, keyed for `ProvenAddresses`
 * by `addressKey` and shown to the creator in the ingest-error list by `addressText`.
 *
 * Without trusted proxies it is the TCP peer. `X-Forwarded-For` is anyone's to send, so
 * it is read only on a connection from a trusted proxy (TRUSTED_PROXIES); a spoofed
 * address from anywhere else changes nothing. From a trusted proxy the client is the
 * first hop, from the right, that is not itself a trusted proxy, every header of it read
 * in order, since some proxies add a header of their own instead of appending to the
 * client's. A hop that is not an address ends the walk at the last trusted one: such
 * requests share that proxy's lane rather than take a lane the client named.
 *
 * The PROXY protocol is not read, though uWebSockets.js parses it: version 20.30 reads a
 * PROXY header at the start of every request, not only of the connection, so behind a
 * TCP proxy a client could send its own on its second request and name any address.
 */
export class ClientAddresses {
  readonly #trusted: BlockList | undefined

  /** `trusted`: the proxies in front of the gateway; undefined trusts none. */
  constructor(trusted: BlockList | undefined) {
    this.#trusted = trusted
  }

  /** Read while uWS still holds the request: its headers are gone once the handler returns. */
  of(res: HttpResponse, req: HttpRequest): Buffer {
    const peer = Buffer.from(res.getRemoteAddress())
    if (this.#trusted === undefined || !this.#isTrusted(peer)) return peer
    let client: Buffer = peer
    const forwarded: string[] = []
    req.forEach((name, value) => {
      if (name === 'x-forwarded-for') forwarded.push(value)
    })
    const hops = forwarded.join(',').split(',')
    for (let i = hops.length - 1; i >= Math.max(0, hops.length - MAX_FORWARDED_HOPS); i--) {
      const hop = addressBytes(forwardedHop(hops[i] as string))
      if (hop === undefined) break
      if (!this.#isTrusted(hop)) return hop
      client = hop
    }
    return client
  }

  #isTrusted(address: Buffer): boolean {
    return (this.#trusted as BlockList).check(addressText(address), ipv4Of(address) === undefined ? 'ipv6' : 'ipv4')
  }
}

/**
 * An address's 4 or 16 bytes → its key: IPv4 (also v4-mapped) as 8 hex digits, IPv6 as
 * the 16 of its /64 (one client is usually given a whole /64).
 */
export function addressKey(raw: Buffer): string {
  const v4 = ipv4Of(raw)
  return v4 === undefined ? raw.toString('hex', 0, 8) : v4.toString('hex')
}

/** An address's 4 or 16 bytes as people write it: `192.0.2.7`, `2001:db8::1` (RFC 5952). */
export function addressText(raw: Buffer): string {
  const v4 = ipv4Of(raw)
  if (v4 !== undefined) return v4.join('.')
  const groups: string[] = []
  for (let i = 0; i < 16; i += 2) groups.push(raw.readUInt16BE(i).toString(16))
  // The longest run of two or more zero groups, the first of equals, becomes `::`.
  let best = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    let j = i
    while (j < 8 && groups[j] === '0') j++
    if (j - i > bestLength) [best, bestLength] = [i, j - i]
    i = j === i ? i + 1 : j
  }
  if (best < 0) return groups.join(':')
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLength).join(':')}`
}

function ipv4Of(raw: Buffer): Buffer | undefined {
  if (raw.length === 4) return raw
  return raw.length === 16 && raw.subarray(0, 12).equals(V4_MAPPED) ? raw.subarray(12) : undefined
}

/**
 * One `X-Forwarded-For` entry without what some proxies add around the address:
 * spaces, an IPv6 address's brackets, a port.
 */
function forwardedHop(entry: string): string {
  const hop = entry.trim()
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(hop)
  if (bracketed !== null) return bracketed[1] as string
  const v4WithPort = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(hop)
  return v4WithPort === null ? hop : (v4WithPort[1] as string)
}

/** The 4 bytes of an IPv4 address or the 16 of an IPv6 one written as text; undefined for anything else. */
export function addressBytes(text: string): Buffer | undefined {
  const family = isIP(text)
  if (family === 4) return Buffer.from(text.split('.').map(Number))
  if (family !== 6) return undefined
  // A zone (fe80::1%eth0) names an interface of the sender's, not part of the address.
  const address = text.split('%')[0] as string
  const out = Buffer.alloc(16)
  // isIP has checked the syntax: at most one `::`, and an IPv4 tail only at the end.
  const [head = '', tail] = address.split('::')
  const groupsOf = (part: string): number[] =>
    part === ''
      ? []
      : part.split(':').flatMap((g) => {
          if (!g.includes('.')) return [parseInt(g, 16)]
          const [a, b, c, d] = g.split('.').map(Number) as [number, number, number, number]
          return [(a << 8) | b, (c << 8) | d]
        })
  const front = groupsOf(head)
  const back = tail === undefined ? [] : groupsOf(tail)
  front.forEach((g, i) => out.writeUInt16BE(g, i * 2))
  back.forEach((g, i) => out.writeUInt16BE(g, 16 - (back.length - i) * 2))
  return out
}
