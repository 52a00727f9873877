import t from 'tap'
import type { HttpResponse } from '../../gateway/http/uws.js'
import { clientAddress, PROVEN_ADDRESSES, ProvenAddresses } from '../../gateway/proven-addresses.js'

const UNPROVEN = 'src_a\0unproven'

t.test('an address is proven for one source only, until it has been quiet for an hour', async (t) => {
  let now = 1_000_000
  const proven = new ProvenAddresses(() => now)
  t.equal(proven.laneOf('src_a', 'aa', 'src_a'), UNPROVEN, 'unknown at first')
  proven.prove('src_a', 'aa')
  t.equal(proven.laneOf('src_a', 'aa', 'src_a'), 'src_a', 'proven: counted under the source itself')
  t.equal(proven.laneOf('src_a', 'aa', 'creator_1'), 'creator_1', 'or under its creator, for the slow-upload places')
  t.equal(proven.laneOf('src_a', 'bb', 'src_a'), UNPROVEN, 'another address of the same source is not')
  t.equal(proven.laneOf('src_b', 'aa', 'src_b'), 'src_b\0unproven', 'nor is the same address for another source')
  now += PROVEN_ADDRESSES.forMs - 1
  t.equal(proven.laneOf('src_a', 'aa', 'src_a'), 'src_a', 'still proven just inside the hour')
  now += 1
  t.equal(proven.laneOf('src_a', 'aa', 'src_a'), UNPROVEN, 'an hour after the last proof it is not')
})

t.test('a proof is renewed at most once a minute', async (t) => {
  let now = 0
  const proven = new ProvenAddresses(() => now)
  proven.prove('src_a', 'early')
  proven.prove('src_a', 'late')
  now = PROVEN_ADDRESSES.renewAfterMs - 1
  proven.prove('src_a', 'early')
  now = PROVEN_ADDRESSES.renewAfterMs
  proven.prove('src_a', 'late')
  now = PROVEN_ADDRESSES.forMs
  t.equal(proven.laneOf('src_a', 'early', 'src_a'), UNPROVEN, 'a proof inside the minute did not renew it')
  t.equal(proven.laneOf('src_a', 'late', 'src_a'), 'src_a', 'a proof a minute later did')
})

t.test('past the bound the least recently proven address goes first', async (t) => {
  let now = 0
  const proven = new ProvenAddresses(() => now)
  for (let i = 0; i < PROVEN_ADDRESSES.max; i++) proven.prove('src_a', `a${i}`)
  now = PROVEN_ADDRESSES.renewAfterMs
  proven.prove('src_a', 'a0')
  proven.prove('src_a', 'new')
  t.equal(proven.size, PROVEN_ADDRESSES.max, 'bounded')
  t.equal(proven.laneOf('src_a', 'a1', 'src_a'), UNPROVEN, 'the least recently proven went')
  t.equal(proven.laneOf('src_a', 'a0', 'src_a'), 'src_a', 'the first proven, proven again, stayed')
  t.equal(proven.laneOf('src_a', 'new', 'src_a'), 'src_a')
})

t.test('an address is IPv4 whole, or the /64 of an IPv6 address; an IPv4 address on an IPv6 socket is its IPv4 address', async (t) => {
  const of = (hex: string) => clientAddress({ getRemoteAddress: () => new Uint8Array(Buffer.from(hex, 'hex')).buffer } as unknown as HttpResponse)
  t.equal(of('7f000001'), '7f000001')
  t.equal(of('00000000000000000000ffff7f000001'), '7f000001', 'v4-mapped')
  t.equal(of('20010db8000000010000000000000001'), '20010db800000001')
  t.equal(of('20010db80000000100000000000000ff'), '20010db800000001', 'one /64, one address')
  t.not(of('20010db80000000200000000000000ff'), of('20010db80000000100000000000000ff'), 'another /64, another address')
})
