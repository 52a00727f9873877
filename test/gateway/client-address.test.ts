import { BlockList } from 'node:net'
import t from 'tap'
import { addressBytes, addressKey, addressText, ClientAddresses } from '../../gateway/client-address.js'
import type { HttpRequest, HttpResponse } from '../../gateway/http/uws.js'
import { parseTrustedProxies } from '../../config/index.js'

const hex = (h: string) => Buffer.from(h, 'hex')

/**
 * What ClientAddresses reads of uWS's request and response, for the cases no socket
 * here can produce (peers from other networks); trusted-proxies.test.ts sends the
 * real thing through the gateway.
 */
function request(peer: string, forwardedFor: string[]): [HttpResponse, HttpRequest] {
  const bytes = addressBytes(peer) as Buffer
  const res = { getRemoteAddress: () => new Uint8Array(bytes).buffer }
  const req = { forEach: (cb: (k: string, v: string) => void) => forwardedFor.forEach((v) => cb('x-forwarded-for', v)) }
  return [res as unknown as HttpResponse, req as unknown as HttpRequest]
}

t.test('an address is IPv4 whole, or the /64 of an IPv6 address; an IPv4 address on an IPv6 socket is its IPv4 address', async (t) => {
  t.equal(addressKey(hex('7f000001')), '7f000001')
  t.equal(addressKey(hex('00000000000000000000ffff7f000001')), '7f000001', 'v4-mapped')
  t.equal(addressKey(hex('20010db8000000010000000000000001')), '20010db800000001')
  t.equal(addressKey(hex('20010db80000000100000000000000ff')), '20010db800000001', 'one /64, one address')
  t.not(addressKey(hex('20010db80000000200000000000000ff')), addressKey(hex('20010db80000000100000000000000ff')), 'another /64, another address')
})

t.test('addresses written as text read to their bytes; anything else is not an address', async (t) => {
  const cases: Array<[string, string]> = [
    ['192.0.2.7', 'c0000207'],
    ['::1', '00000000000000000000000000000001'],
    ['2001:db8::1', '20010db8000000000000000000000001'],
    ['2001:db8:0:1::', '20010db8000000010000000000000000'],
    ['2001:DB8:0:1:2:3:4:5', '20010db8000000010002000300040005'],
    ['::ffff:192.0.2.7', '00000000000000000000ffffc0000207'],
    ['64:ff9b::192.0.2.7', '0064ff9b0000000000000000c0000207'],
    ['fe80::1%eth0', 'fe800000000000000000000000000001'],
  ]
  for (const [text, bytes] of cases) t.equal(addressBytes(text)?.toString('hex'), bytes, text)
  for (const junk of ['', 'unknown', '192.0.2.256', '1.2.3', '2001:db8::1::2', '_hidden', ' 192.0.2.7']) t.equal(addressBytes(junk), undefined, JSON.stringify(junk))
})

t.test('an address is shown as people write it: IPv4 dotted, IPv6 with its longest run of zero groups as ::', async (t) => {
  const cases: Array<[string, string]> = [
    ['c0000207', '192.0.2.7'],
    ['00000000000000000000ffffc0000207', '192.0.2.7'],
    ['00000000000000000000000000000001', '::1'],
    ['00000000000000000000000000000000', '::'],
    ['20010db8000000000000000000000001', '2001:db8::1'],
    ['20010db8000000010000000000000000', '2001:db8:0:1::'],
    ['20010db8000000010001000100010001', '2001:db8:0:1:1:1:1:1'],
    ['20010db8000000000001000000000001', '2001:db8::1:0:0:1'],
    ['20010db8000100000000000100000001', '2001:db8:1::1:0:1'],
  ]
  for (const [bytes, text] of cases) t.equal(addressText(hex(bytes)), text, text)
  for (const [, text] of cases) t.equal(addressText(addressBytes(text) as Buffer), text, `${text} reads back as itself`)
})

t.test('without trusted proxies the client is the TCP peer, whatever the request says', async (t) => {
  const addresses = new ClientAddresses(undefined)
  t.equal(addressKey(addresses.of(...request('192.0.2.7', ['198.51.100.1']))), 'c0000207')
})

t.test('from a trusted proxy the client is the first address from the right that is not a trusted proxy', async (t) => {
  const trusted = parseTrustedProxies('10.0.0.0/8, 192.0.2.7, fd00::/8') as BlockList
  const addresses = new ClientAddresses(trusted)
  const of = (peer: string, ...xff: string[]) => addressKey(addresses.of(...request(peer, xff)))
  t.equal(of('198.51.100.50', '203.0.113.10'), 'c6336432', 'an untrusted peer is the client: its X-Forwarded-For is ignored')
  t.equal(of('192.0.2.7', '203.0.113.10'), 'cb00710a', 'X-Forwarded-For of a trusted proxy')
  t.equal(of('192.0.2.7', '1.1.1.1, 203.0.113.10, 10.2.2.2'), 'cb00710a', 'right to left past the trusted hops: the client cannot choose by prepending')
  t.equal(of('192.0.2.7', '1.1.1.1', '203.0.113.10'), 'cb00710a', 'a header a proxy added after the client one is read last')
  t.equal(of('192.0.2.7', ' [2001:db8:0:1::5]:443 '), '20010db800000001', 'brackets, port and spaces around an IPv6 hop')
  t.equal(of('192.0.2.7', '203.0.113.10:51000'), 'cb00710a', 'an IPv4 hop with a port')
  t.equal(of('192.0.2.7', '203.0.113.10, unknown'), 'c0000207', 'a hop that is not an address stops the walk at the last trusted one')
  t.equal(of('192.0.2.7', '203.0.113.10, 010.1.1.1'), 'c0000207', 'so does one with leading zeros, which some parsers read as octal')
  t.equal(of('192.0.2.7'), 'c0000207', 'a trusted proxy naming no one is the client')
  t.equal(of('fd12::1', '::ffff:203.0.113.10'), 'cb00710a', 'an IPv6 proxy, a v4-mapped client')
  const chain = Array.from({ length: 20 }, (_, i) => `10.0.0.${i}`)
  t.equal(of('192.0.2.7', `203.0.113.10, ${chain.join(', ')}`), '0a000004', 'at most 16 hops are looked at: a longer chain ends at the 16th')
})

t.test('TRUSTED_PROXIES entries are addresses or CIDR prefixes; anything else is named', async (t) => {
  t.equal(parseTrustedProxies(''), undefined)
  t.equal(parseTrustedProxies(' , '), undefined)
  const list = parseTrustedProxies('10.0.0.0/8,2001:db8::/32,192.0.2.7') as BlockList
  t.ok(list.check('10.200.0.1', 'ipv4') && list.check('2001:db8:ffff::1', 'ipv6') && list.check('192.0.2.7', 'ipv4'))
  t.notOk(list.check('192.0.2.8', 'ipv4'))
  for (const bad of ['0.0.0.0/0', '::/0', '10.0.0.0/00', '10.0.0.0/33', 'fd00::/129', 'proxy.internal', '10.0.0.0/8/8', '10.0.0.0/', '10.0.0.0/-1', '10.0.0.0/1e1']) {
    t.throws(() => parseTrustedProxies(`192.0.2.7,${bad}`), { message: new RegExp(JSON.stringify(bad).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')) }, bad)
  }
})
