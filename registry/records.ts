import { randomBytes } from 'node:crypto'
import type { Listing, Manifest, RevocationReason } from '../schemas/index.js'

/** A new record id: the kind's prefix and 96 random bits, so ids reveal neither count nor order. */
export const newId = (prefix: string): string => `${prefix}_${randomBytes(12).toString('base64url')}`

/**
 * `metrics` reads `GET /metrics` and nothing else: what a Prometheus scraper holds, so
 * that a leaked scrape credential grants no control-plane right. `scorer` posts outcomes
 * (`POST /v1/scoring/outcomes`) and nothing else: what the scoring service holds.
 */
export type Role = 'admin' | 'creator' | 'renter' | 'metrics' | 'scorer'

/** Who a bearer token speaks for. */
export interface Principal {
  readonly role: Role
  readonly subject: string
  /** The token it authenticated with; null for the admin token, which is not a record. */
  readonly tokenId: string | null
}

/**
 * Longest bearer token looked at, admin token included: enough for any generated
 * token (57 characters) with room, and a bound on what an unauthenticated request can
 * make the gateway hash.
 */
export const MAX_TOKEN_CHARS = 256

/** A token as stored: only its SHA-256, never the token itself. */
export interface TokenRecord {
  token_id: string
  sha256: string
  role: Exclude<Role, 'admin'>
  subject: string
  created_at: string
  /** Set when revoked; the token then authenticates no more. */
  revoked_at: string | null
}

export interface AgentRecord {
  agent_id: string
  creator_id: string
  slots: number
  created_at: string
}

export interface SourceRecord {
  source_id: string
  agent_id: string
  creator_id: string
  manifest: Manifest
  listing: Listing
  created_at: string
  /** Set once the source's signals stayed over its max_rate for the flagging window; cleared only by an operator. */
  flagged_for_review_at: string | null
  /** When the manifest or listing last changed; null until then (and in records kept before changes were possible). */
  updated_at: string | null
  /**
   * Set when the source is retired: its slot is free, ingest to it is refused like ingest
   * to a source that does not exist, and its record and history stay readable. Final.
   */
  retired_at: string | null
}

/** A key's life: pending (signs only test signals) → active → grace (still verifies during a rotation) → revoked; forward-only, and revoked from any state. */
export type KeyState = 'pending' | 'active' | 'grace' | 'revoked'

export interface KeyRecord {
  key_id: string
  source_id: string
  state: KeyState
  /** base64url of the 32 raw bytes. */
  public_key: string
  created_at: string
  tested_at: string | null
  promoted_at: string | null
  grace_at: string | null
  revoked_at: string | null
  /** Why it was revoked, if the revocation said; null otherwise (and in records kept before reasons were). */
  revocation_reason: RevocationReason | null
}

/** A revoked key whose record was dropped: still refused at registration for its source. */
export interface RetiredKey {
  source_id: string
  /** See `fingerprint` in retired-keys.ts. */
  fingerprint: string
}

/** A signal a dispute names, as the log holds it. */
export interface DisputedSignal {
  signal_id: string
  /** As its 202 answered. */
  received_at: string
  /** Its record in the signal log, which carries the raw body, the signature and the key id. */
  seq: number
}

/** A dispute moves open → accepted or rejected, once (forward-only). */
export type DisputeState = 'open' | 'accepted' | 'rejected'

/**
 * A creator's claim that signals the source accepted were emitted with a leaked key
 * (the last step of the compromise flow, after the key was revoked). Once the review
 * accepts it, those signals are in state `disputed`; they stay in the log and in the
 * public record.
 */
export interface DisputeRecord {
  dispute_id: string
  source_id: string
  /** The source's creator, whose disputes in all are bounded. */
  creator_id: string
  /** The leaked key: revoked before the dispute could be opened. */
  key_id: string
  /** Signals this source accepted under the key, each found in the signal log. */
  signals: DisputedSignal[]
  evidence: string
  state: DisputeState
  /** Subject of the token that opened it (the creator, or `admin`). */
  opened_by: string
  created_at: string
  resolved_at: string | null
  /** The review's note on its decision. */
  resolution: string | null
  /**
   * Where renters receive the dispute's `byo.signal.disputed` events: after the signal
   * log's record `after_seq` (the dispute's placement record, appended as it was accepted;
   * for a dispute accepted by an earlier release, the log's last record then) and before
   * the next. Null until accepted. Absent in disputes accepted before it was kept: derived
   * on load as the greatest seq among its signals, so every process derives the same.
   */
  after_seq?: number | null
  /**
   * The order of acceptance among all disputes (1, 2, ...), which orders disputes accepted
   * at the same `after_seq`; 0 for those accepted before it was kept. Null until accepted.
   */
  accept_order?: number | null
}
