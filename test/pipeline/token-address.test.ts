import { keccak_256 } from '@noble/hashes/sha3.js'
import { base58 } from '@scure/base'
import fc from 'fast-check'
import t from 'tap'
import { isSupportedChain, isValidToken, SUPPORTED_CHAINS, toChecksumAddress } from '../../pipeline/validate/token-address.js'

const EVM_CHAINS = SUPPORTED_CHAINS.filter((c) => c !== 'solana')
const hex = (bytes: Uint8Array): string => Buffer.from(bytes).toString('hex')

// From EIP-55 itself (https://eips.ethereum.org/EIPS/eip-55).
const EIP55_VECTORS = [
  '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
  '0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359',
  '0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB',
  '0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb',
]

t.test('the supported chains are exactly eight: solana and seven EVM chains', async (t) => {
  t.same([...SUPPORTED_CHAINS].sort(), ['arbitrum', 'avalanche', 'base', 'bsc', 'ethereum', 'optimism', 'polygon', 'solana'])
  t.equal(isSupportedChain('ethereum'), true)
  t.equal(isSupportedChain('Ethereum'), false)
  t.equal(isSupportedChain('bitcoin'), false)
  t.equal(isSupportedChain(undefined), false)
  t.equal(isValidToken('bitcoin', EIP55_VECTORS[0]), false, 'an unknown chain validates nothing')
})

t.test('the EIP-55 vectors are accepted on every EVM chain, and computed exactly', async (t) => {
  for (const address of EIP55_VECTORS) {
    t.equal(toChecksumAddress(address.slice(2)), address)
    for (const chain of EVM_CHAINS) t.equal(isValidToken(chain, address), true, `${chain} ${address}`)
    t.equal(isValidToken('solana', address), false, 'not a Solana address')
  }
})

t.test('single-case EVM addresses carry no checksum and are accepted', async (t) => {
  for (const address of EIP55_VECTORS) {
    t.equal(isValidToken('ethereum', `0x${address.slice(2).toLowerCase()}`), true)
    t.equal(isValidToken('ethereum', `0x${address.slice(2).toUpperCase()}`), true)
  }
  t.equal(isValidToken('ethereum', `0x${'0'.repeat(40)}`), true)
})

t.test('an EIP-55 address with one letter case flipped is refused', async (t) => {
  for (const address of EIP55_VECTORS) {
    for (let i = 2; i < address.length; i++) {
      const ch = address[i]!
      if (!/[a-fA-F]/.test(ch)) continue
      const flipped = ch === ch.toLowerCase() ? ch.toUpperCase() : ch.toLowerCase()
      const bad = address.slice(0, i) + flipped + address.slice(i + 1)
      // Flipping the only letter of one case would make it single-case (and valid): skip that.
      if (!/[a-f]/.test(bad.slice(2)) || !/[A-F]/.test(bad.slice(2))) continue
      t.equal(isValidToken('ethereum', bad), false, bad)
    }
  }
})

t.test('malformed EVM addresses are refused', async (t) => {
  const good = EIP55_VECTORS[0]!
  for (const bad of [
    good.slice(0, -1), `${good}0`, good.slice(2), `0X${good.slice(2)}`, ` ${good}`, `${good} `,
    `0x${'g'.repeat(40)}`, '0x', '', `0x${'0'.repeat(64)}`,
  ]) {
    t.equal(isValidToken('base', bad), false, JSON.stringify(bad))
  }
  t.equal(isValidToken('base', 42), false, 'not a string')
})

t.test('known Solana mints are accepted', async (t) => {
  for (const mint of ['So11111111111111111111111111111111111111112', 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v']) {
    t.equal(isValidToken('solana', mint), true, mint)
    t.equal(isValidToken('ethereum', mint), false, 'not an EVM address')
  }
  // The system program: 32 zero bytes, written as 32 ones.
  t.equal(isValidToken('solana', '11111111111111111111111111111111'), true)
})

t.test('malformed Solana addresses are refused', async (t) => {
  const mint = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'
  for (const bad of [
    ` ${mint}`, `${mint} `, mint.replace('E', '0'), mint.replace('E', 'O'), mint.replace('E', 'I'), mint.replace('E', 'l'),
    mint.slice(0, 31), `${mint}1`, base58.encode(new Uint8Array(31).fill(7)), base58.encode(new Uint8Array(33).fill(7)),
    '1111111111111111111111111111111', '', 'So1111111111111111111111111111111111111111z2',
  ]) {
    t.equal(isValidToken('solana', bad), false, JSON.stringify(bad))
  }
})

t.test('property: any 32 bytes in base58 is a valid Solana address', async (t) => {
  fc.assert(fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => isValidToken('solana', base58.encode(bytes))))
  t.pass()
})

t.test('property: base58 of any other length is refused', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }).filter((b) => b.length !== 32), (bytes) => !isValidToken('solana', base58.encode(bytes))),
  )
  t.pass()
})

t.test('property: any 20 bytes, EIP-55 checksummed, lower- or upper-cased, is valid', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), fc.constantFrom(...EVM_CHAINS), (bytes, chain) => {
      const checksummed = toChecksumAddress(hex(bytes))
      return (
        isValidToken(chain, checksummed) &&
        isValidToken(chain, checksummed.toLowerCase()) &&
        isValidToken(chain, `0x${checksummed.slice(2).toUpperCase()}`)
      )
    }),
  )
  t.pass()
})

t.test('property: the checksum follows EIP-55 as written (nibble ≥ 8 means upper case)', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), (bytes) => {
      const lower = hex(bytes)
      const hashHex = hex(keccak_256(new TextEncoder().encode(lower)))
      const expected = [...lower].map((c, i) => (parseInt(hashHex[i]!, 16) >= 8 ? c.toUpperCase() : c)).join('')
      return toChecksumAddress(lower) === `0x${expected}`
    }),
  )
  t.pass()
})

t.test('property: EVM hex of any length other than 20 bytes is refused', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 40 }).filter((b) => b.length !== 20), (bytes) => !isValidToken('ethereum', `0x${hex(bytes)}`)),
  )
  t.pass()
})

t.test('property: a mixed-case address whose case disagrees with the checksum is refused', async (t) => {
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 20, maxLength: 20 }), fc.nat(), (bytes, seed) => {
      const good = toChecksumAddress(hex(bytes))
      const letters = [...good.slice(2)].flatMap((c, i) => (/[a-fA-F]/.test(c) ? [i + 2] : []))
      fc.pre(letters.length >= 3)
      const at = letters[seed % letters.length]!
      const c = good[at]!
      const bad = good.slice(0, at) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + good.slice(at + 1)
      const body = bad.slice(2)
      fc.pre(/[a-f]/.test(body) && /[A-F]/.test(body))
      return !isValidToken('ethereum', bad)
    }),
  )
  t.pass()
})
