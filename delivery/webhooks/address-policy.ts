import { isIP } from 'node:net'

/**
 * Which IP addresses a webhook may never reach: everything that is not a public unicast
 * address on the internet. A webhook URL is the renter's; without this rule it would let
 * any renter make the gateway call its own loopback services, the cloud metadata endpoint
 * or the operator's private network (server-side request forgery).
 *
 * IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4) are judged by the IPv4
 * address inside, since that is where a connection ends up; Teredo and the deprecated
 * IPv4-compatible form are refused whole.
 */

interface Range {
  readonly bytes: readonly number[]
  readonly bits: number
  readonly reason: string
}

function v4(cidr: string, reason: string): Range {
  const [addr, bits] = cidr.split('/') as [string, string]
  return { bytes: addr.split('.').map(Number), bits: Number(bits), reason }
}

function v6(cidr: string, reason: string): Range {
  const [addr, bits] = cidr.split('/') as [string, string]
  return { bytes: [...(ipv6Bytes(addr) ?? [])], bits: Number(bits), reason }
}

// Most specific first: the first match names the reason.
const V4_REFUSED: readonly Range[] = [
  v4('169.254.169.254/32', 'the cloud metadata address'),
  v4('0.0.0.0/8', 'a "this network" address'),
  v4('10.0.0.0/8', 'a private address'),
  v4('100.64.0.0/10', 'a shared (carrier-grade NAT) address'),
  v4('127.0.0.0/8', 'a loopback address'),
  v4('169.254.0.0/16', 'a link-local address'),
  v4('172.16.0.0/12', 'a private address'),
  v4('192.0.0.0/24', 'an IETF protocol address'),
  v4('192.0.2.0/24', 'a documentation address'),
  v4('192.88.99.0/24', 'a 6to4 relay address'),
  v4('192.168.0.0/16', 'a private address'),
  v4('198.18.0.0/15', 'a benchmarking address'),
  v4('198.51.100.0/24', 'a documentation address'),
  v4('203.0.113.0/24', 'a documentation address'),
  v4('224.0.0.0/4', 'a multicast address'),
  v4('240.0.0.0/4', 'a reserved or broadcast address'),
]

const V6_REFUSED: readonly Range[] = [
  v6('::/128', 'the unspecified address'),
  v6('::1/128', 'a loopback address'),
  v6('fd00:ec2::254/128', 'the cloud metadata address'),
  v6('::/96', 'an IPv4-compatible address'),
  v6('64:ff9b:1::/48', 'a local NAT64 address'),
  v6('100::/64', 'a discard-only address'),
  v6('2001::/32', 'a Teredo address'),
  v6('2001:db8::/32', 'a documentation address'),
  v6('2001::/23', 'an IETF protocol address'),
  v6('fc00::/7', 'a unique local (private) address'),
  v6('fe80::/10', 'a link-local address'),
  v6('fec0::/10', 'a site-local address'),
  v6('ff00::/8', 'a multicast address'),
]

function matches(bytes: ArrayLike<number>, range: Range): boolean {
  let bits = range.bits
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff
    if (((bytes[i] as number) & mask) !== ((range.bytes[i] as number) & mask)) return false
  }
  return true
}

/** The 16 bytes of an IPv6 address (zone id dropped), or undefined if it is not one. */
export function ipv6Bytes(address: string): Uint8Array | undefined {
  const text = address.replace(/%.*$/, '')
  if (isIP(text) !== 6) return undefined
  let groups: string[]
  const lastColon = text.lastIndexOf(':')
  const tail = text.slice(lastColon + 1)
  let head = text
  const embedded: number[] = []
  if (tail.includes('.')) {
    embedded.push(...tail.split('.').map(Number))
    head = text.slice(0, lastColon + 1) + '0:0'
  }
  const [left, right] = head.split('::') as [string, string | undefined]
  const l = left === '' ? [] : left.split(':')
  const r = right === undefined || right === '' ? [] : right.split(':')
  groups = right === undefined ? l : [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r]
  const bytes = new Uint8Array(16)
  groups.forEach((g, i) => {
    const n = parseInt(g, 16)
    bytes[i * 2] = n >> 8
    bytes[i * 2 + 1] = n & 0xff
  })
  if (embedded.length === 4) bytes.set(embedded, 12)
  return bytes
}

function v4Refusal(bytes: ArrayLike<number>): string | undefined {
  return V4_REFUSED.find((r) => matches(bytes, r))?.reason
}

/**
 * Why `address` (an IPv4 or IPv6 address as text) may not be reached by a webhook, or
 * undefined if it may. Anything that is not an IP address is refused.
 */
export function addressRefusal(address: string): string | undefined {
  const kind = isIP(address.replace(/%.*$/, ''))
  if (kind === 4) return v4Refusal(address.split('.').map(Number))
  const bytes = kind === 6 ? ipv6Bytes(address) : undefined
  if (bytes === undefined) return 'not an IP address'
  const fixed = V6_REFUSED.find((r) => matches(bytes, r))
  if (fixed !== undefined) return fixed.reason
  const embedded = (at: number) => [bytes[at]!, bytes[at + 1]!, bytes[at + 2]!, bytes[at + 3]!]
  // ::ffff:a.b.c.d (mapped) and 64:ff9b::a.b.c.d (NAT64) end in the IPv4 address; 2002:aabb:ccdd:: (6to4) carries it after the prefix.
  const inner = matches(bytes, v6('::ffff:0:0/96', '')) ? { v4: embedded(12), form: 'an IPv4-mapped' }
    : matches(bytes, v6('64:ff9b::/96', '')) ? { v4: embedded(12), form: 'a NAT64' }
    : matches(bytes, v6('2002::/16', '')) ? { v4: embedded(2), form: 'a 6to4' }
    : undefined
  if (inner !== undefined) {
    const reason = v4Refusal(inner.v4)
    return reason === undefined ? undefined : `${inner.form} form of ${reason} (${inner.v4.join('.')})`
  }
  // Only global unicast (2000::/3) is routed on the internet.
  if ((bytes[0]! & 0xe0) !== 0x20) return 'a reserved address'
  return undefined
}
