import { BlockList, isIP } from 'node:net'

/**
 * TRUSTED_PROXIES: comma-separated addresses or CIDR prefixes (`10.0.0.0/8`,
 * `fd00::/8`, `192.0.2.7`) of the proxies in front of the gateway. Empty trusts none.
 * Throws a message naming the entry that is neither, or that would trust every peer: a
 * `/0` lets any client name its own address in `X-Forwarded-For`.
 */
export function parseTrustedProxies(value: string): BlockList | undefined {
  const entries = value.split(',').map((e) => e.trim()).filter((e) => e !== '')
  if (entries.length === 0) return undefined
  const list = new BlockList()
  for (const entry of entries) {
    const [address = '', prefix, extra] = entry.split('/')
    const family = isIP(address)
    const bits = family === 4 ? 32 : 128
    if (family === 0 || extra !== undefined || (prefix !== undefined && !(/^\d{1,3}$/.test(prefix) && Number(prefix) <= bits))) {
      throw new Error(`${JSON.stringify(entry)} is not an IPv4 or IPv6 address or a CIDR prefix such as 10.0.0.0/8`)
    }
    if (prefix !== undefined && Number(prefix) === 0) {
      throw new Error(`${JSON.stringify(entry)} would trust every peer, so any client could name its own address: list the proxies`)
    }
    const type = family === 4 ? 'ipv4' : 'ipv6'
    if (prefix === undefined) list.addAddress(address, type)
    else list.addSubnet(address, Number(prefix), type)
  }
  return list
}
