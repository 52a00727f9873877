import t from 'tap'
import { PROVEN_ADDRESSES, ProvenAddresses } from '../../gateway/proven-addresses.js'

t.test('an address is proven for one key only, until it has been quiet for an hour', async (t) => {
  let now = 1_000_000
  const proven = new ProvenAddresses(() => now)
  t.notOk(proven.isProven('key_a', 'aa'), 'unknown at first')
  proven.prove('key_a', 'aa')
  t.ok(proven.isProven('key_a', 'aa'))
  t.notOk(proven.isProven('key_a', 'bb'), 'another address of the same key is not')
  t.notOk(proven.isProven('key_b', 'aa'), 'nor is the same address for another key (a revoked key proves nothing for its successor)')
  now += PROVEN_ADDRESSES.forMs - 1
  t.ok(proven.isProven('key_a', 'aa'), 'still proven just inside the hour')
  now += 1
  t.notOk(proven.isProven('key_a', 'aa'), 'an hour after the last proof it is not')
})

t.test('a proof is renewed at most once a minute', async (t) => {
  let now = 0
  const proven = new ProvenAddresses(() => now)
  proven.prove('key_a', 'early')
  proven.prove('key_a', 'late')
  now = PROVEN_ADDRESSES.renewAfterMs - 1
  proven.prove('key_a', 'early')
  now = PROVEN_ADDRESSES.renewAfterMs
  proven.prove('key_a', 'late')
  now = PROVEN_ADDRESSES.forMs
  t.notOk(proven.isProven('key_a', 'early'), 'a proof inside the minute did not renew it')
  t.ok(proven.isProven('key_a', 'late'), 'a proof a minute later did')
  t.equal(proven.size, 2)
})

t.test('a key keeps its most recently proven addresses up to its bound', async (t) => {
  let now = 0
  const proven = new ProvenAddresses(() => now)
  for (let i = 0; i < PROVEN_ADDRESSES.perKey; i++) proven.prove('key_a', `a${i}`)
  now = PROVEN_ADDRESSES.renewAfterMs
  proven.prove('key_a', 'a0')
  proven.prove('key_a', 'new')
  t.equal(proven.size, PROVEN_ADDRESSES.perKey, 'bounded per key')
  t.notOk(proven.isProven('key_a', 'a1'), 'the least recently proven went')
  t.ok(proven.isProven('key_a', 'a0'), 'the first proven, proven again, stayed')
  t.ok(proven.isProven('key_a', 'new'))
})

t.test('full, the store drops from the key holding the most addresses: one creator proving addresses by the thousand pushes out its own, not others', async (t) => {
  const proven = new ProvenAddresses(() => 0)
  proven.prove('victim', 'server-1')
  proven.prove('victim', 'server-2')
  const keys = Math.ceil(PROVEN_ADDRESSES.max / PROVEN_ADDRESSES.perKey) + 10
  for (let k = 0; k < keys; k++) for (let i = 0; i < PROVEN_ADDRESSES.perKey; i++) proven.prove(`flood_${k}`, `a${i}`)
  t.equal(proven.size, PROVEN_ADDRESSES.max, 'bounded in all')
  t.ok(proven.isProven('victim', 'server-1') && proven.isProven('victim', 'server-2'), 'the key with two addresses kept both')
  t.ok(proven.isProven(`flood_${keys - 1}`, 'a0'), 'the newest proof is kept')
})
