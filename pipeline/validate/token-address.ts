import { keccak_256 } from '@noble/hashes/sha3.js'
import { base58 } from '@scure/base'
import { CHAINS } from '../../schemas/index.js'

/**
 * Token address formats per chain: a token must be a valid mint or account address on
 * one of the chains the manifest declares (solana, or one of seven EVM chains). Syntax
 * and checksum only: whether the account exists on chain is not the gateway's business.
 */
/** The chains a manifest may declare; defined once, with the manifest schema. */
export const SUPPORTED_CHAINS = CHAINS
export type Chain = (typeof SUPPORTED_CHAINS)[number]

const CHAIN_SET: ReadonlySet<string> = new Set(SUPPORTED_CHAINS)

export function isSupportedChain(s: unknown): s is Chain {
  return typeof s === 'string' && CHAIN_SET.has(s)
}

/** True when `token` is a well-formed address on `chain`; false for unknown chains. */
export function isValidToken(chain: string, token: unknown): boolean {
  if (typeof token !== 'string' || !isSupportedChain(chain)) return false
  return chain === 'solana' ? isSolanaAddress(token) : isEvmAddress(token)
}

/**
 * Solana: base58 of a 32-byte public key (mint or account). 32 bytes take 32 to 44
 * base58 characters; bounding the length first keeps the big-number decode cheap.
 * Off-curve addresses (PDAs) are valid accounts, so no curve check.
 */
export function isSolanaAddress(s: string): boolean {
  if (s.length < 32 || s.length > 44) return false
  try {
    // Throws on any character outside the Bitcoin alphabet (including spaces, 0, O, I, l).
    return base58.decode(s).length === 32
  } catch {
    return false
  }
}

const EVM_ADDRESS = /^0x[0-9a-fA-F]{40}$/
const HAS_LOWER = /[a-f]/
const HAS_UPPER = /[A-F]/

/**
 * EVM: `0x` and 40 hex digits. Single-case hex carries no checksum and is accepted;
 * mixed case claims an EIP-55 checksum and must match it, so that a typo in a
 * checksummed address is caught rather than sent to renters.
 */
export function isEvmAddress(s: string): boolean {
  if (!EVM_ADDRESS.test(s)) return false
  const hex = s.slice(2)
  if (!HAS_LOWER.test(hex) || !HAS_UPPER.test(hex)) return true
  return toChecksumAddress(hex) === s
}

/** EIP-55: a letter is upper case iff the matching nibble of keccak256(lowercase hex) is ≥ 8. */
export function toChecksumAddress(hex40: string): string {
  const lower = hex40.toLowerCase()
  const ascii = new Uint8Array(lower.length)
  for (let i = 0; i < lower.length; i++) ascii[i] = lower.charCodeAt(i)
  const hash = keccak_256(ascii)
  let out = '0x'
  for (let i = 0; i < lower.length; i++) {
    const nibble = (hash[i >> 1]! >> (i % 2 === 0 ? 4 : 0)) & 0xf
    out += nibble >= 8 ? lower[i]!.toUpperCase() : lower[i]
  }
  return out
}
