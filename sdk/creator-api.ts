/** What the control plane answers a creator, as the SDK reads it (fields the gateway may add later are kept). */

export interface AgentView {
  readonly agent_id: string
  readonly creator_id: string
  readonly slots: number
  readonly slots_used: number
  readonly open_slots: number
  readonly created_at: string
}

export interface SourceView {
  readonly source_id: string
  readonly agent_id: string
  readonly creator_id: string
  readonly manifest: Record<string, unknown>
  readonly listing: Record<string, unknown> | null
  readonly created_at: string
  /** The URL signals are pushed to. */
  readonly ingest_endpoint: string
  readonly flagged_for_review: boolean
  readonly flagged_for_review_at: string | null
}

export type KeyState = 'pending' | 'active' | 'grace' | 'revoked'

export interface KeyView {
  readonly key_id: string
  readonly source_id: string
  readonly state: KeyState
  /** The 32 raw bytes, unpadded base64url. */
  readonly public_key: string
  readonly created_at: string
  readonly tested_at: string | null
  readonly promoted_at: string | null
  readonly grace_at: string | null
  readonly revoked_at: string | null
}

/** An accepted signal, as its source's creator sees it. */
export interface SignalView {
  readonly signal_id: string
  readonly source_id: string
  /** disputed once an accepted dispute covers it. */
  readonly state: 'accepted' | 'disputed'
  readonly dispute_id: string | null
}

/** One refused push, as the source's creator sees it. */
export interface IngestErrorView {
  readonly request_id: string
  readonly time: string
  readonly status: number
  readonly code: string
  readonly key_id: string | null
  readonly signal_id: string | null
  readonly client_address: string | null
}

/** A page of a list; `nextCursor` is null on the last. */
export interface Page<T> {
  readonly items: T[]
  readonly nextCursor: string | null
}
