import { MAX_SLOTS_PER_AGENT } from '../schemas/index.js'
import { RETIRED_KEYS_PER_SOURCE } from './retired-keys.js'

/** Bounds on what the registry holds: tokens and agents in all, slots per agent, keys per source. */
export const REGISTRY_LIMITS = {
  /** Tokens that authenticate. */
  tokens: 100_000,
  /**
   * Revoked token records kept, so a revocation can be read back and repeated; past
   * this the oldest is dropped (its hash goes with it, so it still authenticates nobody).
   */
  revokedTokens: 10_000,
  agents: 100_000,
  slotsPerAgent: MAX_SLOTS_PER_AGENT,
  /** Sources in all, retired ones included: agents times slots alone would allow 100 million. */
  sources: 100_000,
  /**
   * Retired sources one agent keeps. A retired source frees its slot but keeps its record
   * (its history stays readable), so without this one agent could retire and register
   * in a loop until the registry's bound on sources stopped every creator.
   */
  retiredSourcesPerAgent: 1000,
  /** Keys that can still sign (pending, active, grace). */
  liveKeysPerSource: 32,
  /**
   * Revoked keys kept per source, so a request signed with one is told `revoked_key`.
   * Past this, the oldest revoked record is dropped and only its fingerprint is kept, so
   * the public key still cannot be registered again: rotation must never run into a
   * wall, and the registry stays bounded (a year of weekly rotations fits;
   * 96 records at most per source, about 50 KB in memory).
   */
  revokedKeysPerSource: 64,
  /** Fingerprints of dropped revoked keys kept per source. */
  retiredKeysPerSource: RETIRED_KEYS_PER_SOURCE,
} as const
